"""SwiGLU gate: silu(x @ W1^T) * (x @ W3^T), the first half of a LLaMA MLP.

Full: two 4096 x 4096 x 4096 GEMMs = 275 GFLOP, ~5.5 ms on an H100 (float32).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(self.gate(x)) * self.up(x)


SIZES = {
    "small": {"batch": 64, "dim": 96, "hidden": 128},
    "full": {"batch": 4096, "dim": 4096, "hidden": 4096},
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
    return 2 * 2 * b * d * h + 5 * b * h  # two GEMMs, silu (4) and the product


def bytes_moved(size: str = "full") -> int:
    s = SIZES[size]
    b, d, h = s["batch"], s["dim"], s["hidden"]
    return 4 * (b * d + 2 * h * d + b * h)
