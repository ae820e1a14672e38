"""A small CNN image classifier: three conv-ReLU stages with pooling, a global average pool
and a linear head.

Full: 256 images of 128^2: 85 GFLOP, ~2 ms on an H100 (float32).
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, widths: list[int], classes: int) -> None:
        super().__init__()
        c1, c2, c3 = widths
        self.features = nn.Sequential(
            nn.Conv2d(3, c1, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(c1, c2, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(c2, c3, 3, padding=1),
            nn.ReLU(),
        )
        self.head = nn.Linear(c3, classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(images).mean(dim=(2, 3)))


SIZES = {
    "small": {"batch": 2, "hw": 16, "widths": [8, 16, 32], "classes": 10},
    "full": {"batch": 256, "hw": 128, "widths": [32, 64, 128], "classes": 1000},
}


def get_inputs(size: str = "full") -> list[torch.Tensor]:
    s = SIZES[size]
    return [torch.randn(s["batch"], 3, s["hw"], s["hw"])]


def get_init_inputs(size: str = "full") -> list:
    s = SIZES[size]
    return [list(s["widths"]), s["classes"]]


def _stages(size: str) -> list[tuple[int, int, int]]:
    """(c_in, c_out, output pixels per image) of the three 3x3 convolutions."""
    s = SIZES[size]
    c1, c2, c3 = s["widths"]
    hw = s["hw"]
    return [(3, c1, hw * hw), (c1, c2, (hw // 2) ** 2), (c2, c3, (hw // 4) ** 2)]


def flops(size: str = "full") -> int:
    s = SIZES[size]
    n, c3, classes = s["batch"], s["widths"][2], s["classes"]
    convs = sum(2 * n * px * co * (ci * 9 + 1) for ci, co, px in _stages(size))  # + bias, relu
    pools = sum(n * co * px for _, co, px in _stages(size)[:2])  # one compare per input
    head = n * c3 * (s["hw"] // 4) ** 2 + 2 * n * c3 * classes + n * classes
    return convs + pools + head


def bytes_moved(size: str = "full") -> int:
    s = SIZES[size]
    n, c3, classes = s["batch"], s["widths"][2], s["classes"]
    params = sum(co * ci * 9 + co for ci, co, _ in _stages(size)) + c3 * classes + classes
    return 4 * (n * 3 * s["hw"] ** 2 + params + n * classes)
