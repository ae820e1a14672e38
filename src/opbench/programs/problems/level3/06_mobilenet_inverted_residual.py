"""MobileNetV2 inverted residual: 1x1 expand, 3x3 depthwise, 1x1 project (each with
BatchNorm), plus the skip connection.

BatchNorm uses batch statistics. Full: 64 x 32 x 112^2 in, 6x expansion: 26 GFLOP; eager is
memory-bound on the 616 MB expanded activations, a few ms on an H100 (float32).
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels: int, expansion: int) -> None:
        super().__init__()
        wide = channels * expansion
        self.expand = nn.Conv2d(channels, wide, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(wide, track_running_stats=False)
        self.depthwise = nn.Conv2d(wide, wide, 3, padding=1, groups=wide, bias=False)
        self.bn2 = nn.BatchNorm2d(wide, track_running_stats=False)
        self.project = nn.Conv2d(wide, channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(channels, track_running_stats=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.nn.functional.relu6(self.bn1(self.expand(x)))
        y = torch.nn.functional.relu6(self.bn2(self.depthwise(y)))
        return x + self.bn3(self.project(y))


SIZES = {
    "small": {"batch": 2, "channels": 8, "expansion": 6, "hw": 8},
    "full": {"batch": 64, "channels": 32, "expansion": 6, "hw": 112},
}


def get_inputs(size: str = "full") -> list[torch.Tensor]:
    s = SIZES[size]
    return [torch.randn(s["batch"], s["channels"], s["hw"], s["hw"])]


def get_init_inputs(size: str = "full") -> list:
    s = SIZES[size]
    return [s["channels"], s["expansion"]]


def flops(size: str = "full") -> int:
    s = SIZES[size]
    c, w = s["channels"], s["channels"] * s["expansion"]
    px = s["batch"] * s["hw"] ** 2
    convs = 2 * px * c * w + 2 * px * w * 9 + 2 * px * w * c
    pointwise = 2 * (8 + 1) * px * w + 8 * px * c + px * c  # two norms+relu6, a norm, the skip
    return convs + pointwise


def bytes_moved(size: str = "full") -> int:
    s = SIZES[size]
    c, w = s["channels"], s["channels"] * s["expansion"]
    params = c * w + 9 * w + w * c + 2 * (2 * w) + 2 * c
    return 4 * (2 * s["batch"] * c * s["hw"] ** 2 + params)
