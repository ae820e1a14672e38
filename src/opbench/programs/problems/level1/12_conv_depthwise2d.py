"""Depthwise 3x3 convolution (groups = channels), as in MobileNet: memory-bound.

Full: batch=96 (3,221 MB moved, 7.7 GFLOP), ~1.07 ms at ~3 TB/s on an
H100 (memory-bound: about 1 ms of traffic at the copy bandwidth).
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, groups=channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


SIZES = {
    "small": {"batch": 2, "channels": 8, "hw": 16},
    "full": {"batch": 96, "channels": 256, "hw": 128},
}


def get_inputs(size: str = "full") -> list[torch.Tensor]:
    s = SIZES[size]
    return [torch.randn(s["batch"], s["channels"], s["hw"], s["hw"])]


def get_init_inputs(size: str = "full") -> list:
    return [SIZES[size]["channels"]]


def flops(size: str = "full") -> int:
    s = SIZES[size]
    out = s["batch"] * s["channels"] * s["hw"] ** 2
    return 2 * out * 9 + out


def bytes_moved(size: str = "full") -> int:
    s = SIZES[size]
    n, c, px = s["batch"], s["channels"], s["hw"] ** 2
    return 4 * (2 * n * c * px + c * 9 + c)
