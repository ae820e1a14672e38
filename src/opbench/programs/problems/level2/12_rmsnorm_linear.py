"""RMSNorm then a bias-free projection: a pre-norm transformer's attention or MLP entry.

Full: 2 * 4096^3 = 137 GFLOP, ~2.7 ms on an H100 (float32).
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim: int, out_features: int) -> None:
        super().__init__()
        self.norm = nn.RMSNorm(dim, eps=1e-6)
        self.proj = nn.Linear(dim, out_features, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(self.norm(x))


SIZES = {
    "small": {"rows": 64, "dim": 96, "out_features": 80},
    "full": {"rows": 4096, "dim": 4096, "out_features": 4096},
}


def get_inputs(size: str = "full") -> list[torch.Tensor]:
    s = SIZES[size]
    return [torch.randn(s["rows"], s["dim"]) * 3]


def get_init_inputs(size: str = "full") -> list:
    s = SIZES[size]
    return [s["dim"], s["out_features"]]


def flops(size: str = "full") -> int:
    s = SIZES[size]
    r, d, o = s["rows"], s["dim"], s["out_features"]
    return 4 * r * d + 2 * r * d * o


def bytes_moved(size: str = "full") -> int:
    s = SIZES[size]
    r, d, o = s["rows"], s["dim"], s["out_features"]
    return 4 * (r * d + d + o * d + r * o)
