"""Square matrix multiplication C = A @ B (float32 GEMM).

Full: 2 * 4096^3 = 137 GFLOP, ~2.7 ms on an H100 at ~50 TFLOP/s (IEEE float32).
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b


SIZES = {"small": {"n": 64}, "full": {"n": 4096}}


def get_inputs(size: str = "full") -> list[torch.Tensor]:
    n = SIZES[size]["n"]
    return [torch.randn(n, n), torch.randn(n, n)]


def get_init_inputs(size: str = "full") -> list:
    return []


def flops(size: str = "full") -> int:
    n = SIZES[size]["n"]
    return 2 * n**3


def bytes_moved(size: str = "full") -> int:
    n = SIZES[size]["n"]
    return 4 * 3 * n * n
