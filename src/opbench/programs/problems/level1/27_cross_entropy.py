"""Cross-entropy per sample (reduction="none") from logits and integer class targets.

Per-sample losses, not their mean: a batch mean is nearly the same number for every
input draw, so a constant answer would pass. Full: 32768 x 4096 logits (537 MB),
~0.18 ms at ~3 TB/s on an H100.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, targets, reduction="none")


SIZES = {"small": {"rows": 64, "classes": 96}, "full": {"rows": 196608, "classes": 4096}}


def get_inputs(size: str = "full") -> list[torch.Tensor]:
    s = SIZES[size]
    logits = torch.randn(s["rows"], s["classes"]) * 4
    return [logits, torch.randint(0, s["classes"], (s["rows"],))]


def get_init_inputs(size: str = "full") -> list:
    return []


def flops(size: str = "full") -> int:
    s = SIZES[size]
    return 5 * s["rows"] * s["classes"]  # the log-softmax; the target pick is O(rows)


def bytes_moved(size: str = "full") -> int:
    s = SIZES[size]
    # float32 logits, int64 targets, float32 losses
    return 4 * s["rows"] * s["classes"] + 8 * s["rows"] + 4 * s["rows"]
