"""Token embedding lookup scaled by sqrt(dim) (a gather from a large table).

Full: batch=384 (3,496 MB moved, 0.8 GFLOP), ~1.17 ms at ~3 TB/s on an
H100 (memory-bound: about 1 ms of traffic at the copy bandwidth).
"""

import math

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, vocab: int, dim: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab, dim)
        self.scale = math.sqrt(dim)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.embedding(tokens) * self.scale


SIZES = {
    "small": {"batch": 2, "seq": 16, "vocab": 128, "dim": 32},
    "full": {"batch": 384, "seq": 2048, "vocab": 65536, "dim": 1024},
}


def get_inputs(size: str = "full") -> list[torch.Tensor]:
    s = SIZES[size]
    return [torch.randint(0, s["vocab"], (s["batch"], s["seq"]))]


def get_init_inputs(size: str = "full") -> list:
    s = SIZES[size]
    return [s["vocab"], s["dim"]]


def flops(size: str = "full") -> int:
    s = SIZES[size]
    return s["batch"] * s["seq"] * s["dim"]  # the scale; the gather itself is data movement


def bytes_moved(size: str = "full") -> int:
    s = SIZES[size]
    tokens = s["batch"] * s["seq"]
    # int64 tokens, the whole table (a kernel cannot know which rows are needed), the output
    return 8 * tokens + 4 * s["vocab"] * s["dim"] + 4 * tokens * s["dim"]
