"""Three-layer MLP classifier: Linear-ReLU-Linear-ReLU-Linear.

Full: batch 2048, 1024 -> 4096 -> 4096 -> 1000: 103 GFLOP, ~2 ms on an H100 (float32).
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features: int, hidden: list[int], classes: int) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        width = in_features
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        layers.append(nn.Linear(width, classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


SIZES = {
    "small": {"batch": 16, "in_features": 32, "hidden": [64, 48], "classes": 10},
    "full": {"batch": 2048, "in_features": 1024, "hidden": [4096, 4096], "classes": 1000},
}


def get_inputs(size: str = "full") -> list[torch.Tensor]:
    s = SIZES[size]
    return [torch.randn(s["batch"], s["in_features"])]


def get_init_inputs(size: str = "full") -> list:
    s = SIZES[size]
    return [s["in_features"], list(s["hidden"]), s["classes"]]


def _widths(size: str) -> list[int]:
    s = SIZES[size]
    return [s["in_features"], *s["hidden"], s["classes"]]


def flops(size: str = "full") -> int:
    b, w = SIZES[size]["batch"], _widths(size)
    total = sum(2 * b * i * o + b * o for i, o in zip(w[:-1], w[1:]))  # GEMMs and biases
    return total + sum(b * h for h in w[1:-1])  # ReLUs


def bytes_moved(size: str = "full") -> int:
    b, w = SIZES[size]["batch"], _widths(size)
    params = sum(i * o + o for i, o in zip(w[:-1], w[1:]))
    return 4 * (b * w[0] + params + b * w[-1])
