"""Fused residual add + RMSNorm returning both (normed, new residual), as LLM decoders do.

Full: rows=32768 (2,147 MB moved by one fused pass, 0.7 GFLOP), ~0.72 ms at ~3 TB/s on
an H100; eager makes at least six passes over a row block (the add, then RMSNorm), about
1.1 ms. Not larger: each trial's two 512 MiB outputs travel from the worker to the judge.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.norm = nn.RMSNorm(hidden, eps=1e-6)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        residual = x + residual
        return self.norm(residual), residual


SIZES = {"small": {"rows": 64, "hidden": 96}, "full": {"rows": 32768, "hidden": 4096}}


def get_inputs(size: str = "full") -> list[torch.Tensor]:
    s = SIZES[size]
    return [torch.randn(s["rows"], s["hidden"]), torch.randn(s["rows"], s["hidden"]) * 4]


def get_init_inputs(size: str = "full") -> list:
    return [SIZES[size]["hidden"]]


def flops(size: str = "full") -> int:
    s = SIZES[size]
    return 5 * s["rows"] * s["hidden"]  # the add, then RMSNorm's ~4 ops


def bytes_moved(size: str = "full") -> int:
    s = SIZES[size]
    return 4 * (4 * s["rows"] * s["hidden"] + s["hidden"])
