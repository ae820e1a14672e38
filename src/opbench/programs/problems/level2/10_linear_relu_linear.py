"""Two-layer feed-forward block: Linear, ReLU, Linear (the hidden activation need not hit memory).

Full: 2 * 2 * 4096 * 2048 * 8192 = 275 GFLOP, ~5.5 ms on an H100 (float32).
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


SIZES = {
    "small": {"batch": 64, "dim": 48, "hidden": 96},
    "full": {"batch": 4096, "dim": 2048, "hidden": 8192},
}


def get_inputs(size: str = "full") -> list[torch.Tensor]:
    s = SIZES[size]
    return [torch.randn(s["batch"], s["dim"])]


def get_init_inputs(size: str = "full") -> list:
    s = SIZES[size]
    return [s["dim"], s["hidden"]]


def flops(size: str = "full") -> int:
    s = SIZES[size]
    b, d, h = s["batch"], s["dim"], s["hidden"]
    return 2 * 2 * b * d * h + 2 * b * h + b * d  # two GEMMs, bias+relu, bias


def bytes_moved(size: str = "full") -> int:
    s = SIZES[size]
    b, d, h = s["batch"], s["dim"], s["hidden"]
    return 4 * (b * d + 2 * d * h + h + d + b * d)
