"""Linear then LayerNorm over its output: the norm needs whole rows of the GEMM result.

Full: 2 * 4096^3 = 137 GFLOP, ~2.7 ms on an H100 (float32).
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.norm = nn.LayerNorm(out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.linear(x))


SIZES = {
    "small": {"batch": 64, "in_features": 96, "out_features": 80},
    "full": {"batch": 4096, "in_features": 4096, "out_features": 4096},
}


def get_inputs(size: str = "full") -> list[torch.Tensor]:
    s = SIZES[size]
    return [torch.randn(s["batch"], s["in_features"])]


def get_init_inputs(size: str = "full") -> list:
    s = SIZES[size]
    return [s["in_features"], s["out_features"]]


def flops(size: str = "full") -> int:
    s = SIZES[size]
    b, i, o = s["batch"], s["in_features"], s["out_features"]
    return 2 * b * i * o + b * o + 8 * b * o


def bytes_moved(size: str = "full") -> int:
    s = SIZES[size]
    b, i, o = s["batch"], s["in_features"], s["out_features"]
    return 4 * (b * i + o * i + o + 2 * o + b * o)
