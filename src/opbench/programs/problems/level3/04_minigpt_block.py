"""A GPT-2 style decoder block: pre-norm causal self-attention and a 4x GELU MLP, both residual.

Full: batch 8, 1024 tokens, width 768, 12 heads: 129 GFLOP, ~3 ms on an H100 (float32).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, 4 * dim)
        self.out = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


SIZES = {
    "small": {"batch": 2, "seq": 16, "dim": 32, "heads": 4},
    "full": {"batch": 8, "seq": 1024, "dim": 768, "heads": 12},
}


def get_inputs(size: str = "full") -> list[torch.Tensor]:
    s = SIZES[size]
    return [torch.randn(s["batch"], s["seq"], s["dim"])]


def get_init_inputs(size: str = "full") -> list:
    s = SIZES[size]
    return [s["dim"], s["heads"]]


def flops(size: str = "full") -> int:
    s = SIZES[size]
    n, t, d, h = s["batch"], s["seq"], s["dim"], s["heads"]
    tokens = n * t
    gemms = 2 * tokens * d * (3 * d + d + 4 * d + 4 * d) + tokens * (3 * d + d + 4 * d + d)
    kept = n * h * t * (t + 1) // 2  # causal: the lower triangle of each head's scores
    attention = 4 * kept * (d // h) + 5 * kept
    pointwise = 2 * 8 * tokens * d + 8 * tokens * 4 * d + 2 * tokens * d  # norms, gelu, adds
    return gemms + attention + pointwise


def bytes_moved(size: str = "full") -> int:
    s = SIZES[size]
    tokens, d = s["batch"] * s["seq"], s["dim"]
    params = 2 * 2 * d + (3 * d * d + 3 * d) + (d * d + d) + (4 * d * d + 4 * d) + (4 * d * d + d)
    return 4 * (2 * tokens * d + params)
