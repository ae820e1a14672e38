"""GeGLU's elementwise half: gelu(gate) * up, from two precomputed projections.

Full: rows=20480 (2,013 MB moved by one fused pass, 1.0 GFLOP), ~0.67 ms at ~3 TB/s on
an H100; eager makes five passes (gelu reads and writes, the product reads two and writes),
about 1.1 ms. Not larger: each trial's 640 MiB output travels from the worker to the judge.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
        return F.gelu(gate) * up


SIZES = {"small": {"rows": 64, "cols": 96}, "full": {"rows": 20480, "cols": 8192}}


def get_inputs(size: str = "full") -> list[torch.Tensor]:
    s = SIZES[size]
    return [torch.randn(s["rows"], s["cols"]) * 2, torch.randn(s["rows"], s["cols"])]


def get_init_inputs(size: str = "full") -> list:
    return []


def flops(size: str = "full") -> int:
    s = SIZES[size]
    return 6 * s["rows"] * s["cols"]  # gelu (5) and the product


def bytes_moved(size: str = "full") -> int:
    s = SIZES[size]
    return 4 * 3 * s["rows"] * s["cols"]
