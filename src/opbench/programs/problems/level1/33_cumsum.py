"""Inclusive prefix sum along the last dimension: a scan, hard to parallelise well.

Full: 8192 x 16384 (537 MB in, 537 MB out), ~0.36 ms at ~3 TB/s on an H100.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, dim=-1)


SIZES = {"small": {"rows": 64, "cols": 96}, "full": {"rows": 8192, "cols": 16384}}


def get_inputs(size: str = "full") -> list[torch.Tensor]:
    s = SIZES[size]
    return [torch.randn(s["rows"], s["cols"])]


def get_init_inputs(size: str = "full") -> list:
    return []


def flops(size: str = "full") -> int:
    s = SIZES[size]
    return s["rows"] * s["cols"]


def bytes_moved(size: str = "full") -> int:
    s = SIZES[size]
    return 4 * 2 * s["rows"] * s["cols"]
