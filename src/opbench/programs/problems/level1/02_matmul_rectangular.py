"""Rectangular matrix multiplication (M, K) @ (K, N) with a short inner dimension.

Full: 2 * 8192 * 2048 * 4096 = 137 GFLOP, ~2.7 ms on an H100 (float32).
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


SIZES = {"small": {"m": 64, "k": 32, "n": 48}, "full": {"m": 8192, "k": 2048, "n": 4096}}


def get_inputs(size: str = "full") -> list[torch.Tensor]:
    s = SIZES[size]
    return [torch.randn(s["m"], s["k"]), torch.randn(s["k"], s["n"])]


def get_init_inputs(size: str = "full") -> list:
    return []


def flops(size: str = "full") -> int:
    s = SIZES[size]
    return 2 * s["m"] * s["k"] * s["n"]


def bytes_moved(size: str = "full") -> int:
    s = SIZES[size]
    return 4 * (s["m"] * s["k"] + s["k"] * s["n"] + s["m"] * s["n"])
