"""Batched matrix multiplication (B, M, K) @ (B, K, N), as in attention heads.

Full: 2 * 64 * 512 * 1024 * 1024 = 68.7 GFLOP, ~1.4 ms on an H100 (float32).
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.bmm(a, b)


SIZES = {
    "small": {"b": 4, "m": 16, "k": 24, "n": 32},
    "full": {"b": 64, "m": 512, "k": 1024, "n": 1024},
}


def get_inputs(size: str = "full") -> list[torch.Tensor]:
    s = SIZES[size]
    return [torch.randn(s["b"], s["m"], s["k"]), torch.randn(s["b"], s["k"], s["n"])]


def get_init_inputs(size: str = "full") -> list:
    return []


def flops(size: str = "full") -> int:
    s = SIZES[size]
    return 2 * s["b"] * s["m"] * s["k"] * s["n"]


def bytes_moved(size: str = "full") -> int:
    s = SIZES[size]
    return 4 * s["b"] * (s["m"] * s["k"] + s["k"] * s["n"] + s["m"] * s["n"])
