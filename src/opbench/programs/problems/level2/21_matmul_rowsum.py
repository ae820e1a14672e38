"""Row sums of a GEMM, (x @ W^T).sum(-1): equal to x @ W.sum(0), an algebraic shortcut.

Kernels may use the identity; a judge only sees the (batch,) result. Full: 2 * 4096^3 =
137 GFLOP eager, ~2.7 ms on an H100 (float32); the shortcut needs a matrix-vector product.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x).sum(dim=-1)


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
    return 2 * b * i * o + 2 * b * o  # as written: GEMM, bias, row sum


def bytes_moved(size: str = "full") -> int:
    s = SIZES[size]
    b, i, o = s["batch"], s["in_features"], s["out_features"]
    return 4 * (b * i + o * i + o + b)
