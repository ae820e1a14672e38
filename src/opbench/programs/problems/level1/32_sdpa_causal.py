"""Causal scaled dot-product attention (decoder self-attention), is_causal=True.

Full: B=8, H=16, S=2048, D=64: 4 * B*H*D * S(S+1)/2 = 69 GFLOP of the lower triangle,
~2 ms on an H100 in float32.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


SIZES = {
    "small": {"batch": 2, "heads": 2, "seq": 32, "head_dim": 16},
    "full": {"batch": 8, "heads": 16, "seq": 2048, "head_dim": 64},
}


def get_inputs(size: str = "full") -> list[torch.Tensor]:
    s = SIZES[size]
    shape = (s["batch"], s["heads"], s["seq"], s["head_dim"])
    return [torch.randn(shape) * 2, torch.randn(shape), torch.randn(shape)]


def get_init_inputs(size: str = "full") -> list:
    return []


def flops(size: str = "full") -> int:
    s = SIZES[size]
    kept = s["batch"] * s["heads"] * s["seq"] * (s["seq"] + 1) // 2  # lower triangle
    return 4 * kept * s["head_dim"] + 5 * kept


def bytes_moved(size: str = "full") -> int:
    s = SIZES[size]
    return 4 * 4 * s["batch"] * s["heads"] * s["seq"] * s["head_dim"]
