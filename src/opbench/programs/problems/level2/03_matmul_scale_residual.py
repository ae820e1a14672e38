"""y = scale * (A @ B) + R: a GEMM with a scaled residual add in its epilogue.

Full: 2 * 8192 * 2048 * 4096 = 137 GFLOP, ~2.7 ms on an H100 (float32).
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, a: torch.Tensor, b: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b) * self.scale + residual


SIZES = {
    "small": {"m": 64, "k": 32, "n": 48, "scale": 0.125},
    "full": {"m": 8192, "k": 2048, "n": 4096, "scale": 0.125},
}


def get_inputs(size: str = "full") -> list[torch.Tensor]:
    s = SIZES[size]
    return [
        torch.randn(s["m"], s["k"]),
        torch.randn(s["k"], s["n"]),
        torch.randn(s["m"], s["n"]),
    ]


def get_init_inputs(size: str = "full") -> list:
    return [SIZES[size]["scale"]]


def flops(size: str = "full") -> int:
    s = SIZES[size]
    return 2 * s["m"] * s["k"] * s["n"] + 2 * s["m"] * s["n"]


def bytes_moved(size: str = "full") -> int:
    s = SIZES[size]
    m, k, n = s["m"], s["k"], s["n"]
    return 4 * (m * k + k * n + 2 * m * n)
