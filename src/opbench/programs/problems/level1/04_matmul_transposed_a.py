"""C = A^T @ B where A is stored (K, M): the left operand is read column-major.

Full: 2 * 4096^3 = 137 GFLOP, ~2.7 ms on an H100 (float32).
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a.T @ b


SIZES = {"small": {"m": 48, "k": 64, "n": 40}, "full": {"m": 4096, "k": 4096, "n": 4096}}


def get_inputs(size: str = "full") -> list[torch.Tensor]:
    s = SIZES[size]
    return [torch.randn(s["k"], s["m"]), torch.randn(s["k"], s["n"])]


def get_init_inputs(size: str = "full") -> list:
    return []


def flops(size: str = "full") -> int:
    s = SIZES[size]
    return 2 * s["m"] * s["k"] * s["n"]


def bytes_moved(size: str = "full") -> int:
    s = SIZES[size]
    return 4 * (s["k"] * s["m"] + s["k"] * s["n"] + s["m"] * s["n"])
