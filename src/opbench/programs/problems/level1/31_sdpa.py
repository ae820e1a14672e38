"""Scaled dot-product attention, no mask: softmax(Q K^T / sqrt(d)) V over (B, H, S, D).

Full: B=8, H=16, S=1024, D=64: 4 * B*H*S^2*D = 34 GFLOP, ~1-2 ms on an H100 in float32
(the float32 attention kernels run well below the GEMM rate).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v)


SIZES = {
    "small": {"batch": 2, "heads": 2, "seq": 32, "head_dim": 16},
    "full": {"batch": 8, "heads": 16, "seq": 1024, "head_dim": 64},
}


def get_inputs(size: str = "full") -> list[torch.Tensor]:
    s = SIZES[size]
    shape = (s["batch"], s["heads"], s["seq"], s["head_dim"])
    # queries scaled by 2 so each query attends to a few keys, not a flat average
    return [torch.randn(shape) * 2, torch.randn(shape), torch.randn(shape)]


def get_init_inputs(size: str = "full") -> list:
    return []


def flops(size: str = "full") -> int:
    s = SIZES[size]
    scores = s["batch"] * s["heads"] * s["seq"] ** 2
    return 4 * scores * s["head_dim"] + 5 * scores  # two GEMMs, then the softmax


def bytes_moved(size: str = "full") -> int:
    s = SIZES[size]
    return 4 * 4 * s["batch"] * s["heads"] * s["seq"] * s["head_dim"]
