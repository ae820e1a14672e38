"""Inclusive prefix sum along the last dimension: a scan, hard to parallelise well.

Full: rows=24576 (3,221 MB moved, 0.4 GFLOP), ~1.07 ms at ~3 TB/s on an
H100 (memory-bound: about 1 ms of traffic at the copy bandwidth).
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, dim=-1)


SIZES = {"small": {"rows": 64, "cols": 96}, "full": {"rows": 24576, "cols": 16384}}


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
