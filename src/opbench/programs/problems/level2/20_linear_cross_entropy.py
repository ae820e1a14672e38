"""Language-model head: logits = x @ W^T, then per-token cross-entropy (Liger's fused loss).

A fused kernel never writes the 4096 x 16384 logits. Full: 2 * 4096 * 1024 * 16384 =
137 GFLOP, ~2.7 ms on an H100 (float32).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, dim: int, vocab: int) -> None:
        super().__init__()
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, x: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(self.head(x), targets, reduction="none")


SIZES = {
    "small": {"tokens": 64, "dim": 32, "vocab": 96},
    "full": {"tokens": 4096, "dim": 1024, "vocab": 16384},
}


def get_inputs(size: str = "full") -> list[torch.Tensor]:
    s = SIZES[size]
    # hidden states of norm ~4 per entry so the logits spread like a trained model's
    x = torch.randn(s["tokens"], s["dim"]) * 4
    return [x, torch.randint(0, s["vocab"], (s["tokens"],))]


def get_init_inputs(size: str = "full") -> list:
    s = SIZES[size]
    return [s["dim"], s["vocab"]]


def flops(size: str = "full") -> int:
    s = SIZES[size]
    t, d, v = s["tokens"], s["dim"], s["vocab"]
    return 2 * t * d * v + 5 * t * v


def bytes_moved(size: str = "full") -> int:
    s = SIZES[size]
    t, d, v = s["tokens"], s["dim"], s["vocab"]
    return 4 * (t * d + v * d) + 8 * t + 4 * t
