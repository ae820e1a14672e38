"""Matrix-vector product y = A @ x: memory-bound, the matrix is read once.

Full: m=65536 (3,222 MB moved, 1.6 GFLOP), ~1.07 ms at ~3 TB/s on an
H100 (memory-bound: about 1 ms of traffic at the copy bandwidth).
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.mv(a, x)


SIZES = {"small": {"m": 96, "k": 128}, "full": {"m": 65536, "k": 12288}}


def get_inputs(size: str = "full") -> list[torch.Tensor]:
    s = SIZES[size]
    return [torch.randn(s["m"], s["k"]), torch.randn(s["k"])]


def get_init_inputs(size: str = "full") -> list:
    return []


def flops(size: str = "full") -> int:
    s = SIZES[size]
    return 2 * s["m"] * s["k"]


def bytes_moved(size: str = "full") -> int:
    s = SIZES[size]
    return 4 * (s["m"] * s["k"] + s["k"] + s["m"])
