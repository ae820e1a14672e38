"""Conv3d, ReLU, GroupNorm: a volumetric segmentation network's convolution unit.

Full: 2 * 8 * 64 * (32*64*64) * 32 * 27 = 116 GFLOP, ~2.3 ms on an H100 (float32).
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, groups: int) -> None:
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, 3, padding=1)
        self.norm = nn.GroupNorm(groups, out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(torch.relu(self.conv(x)))


SIZES = {
    "small": {"batch": 1, "in_channels": 4, "out_channels": 8, "groups": 2, "depth": 6, "hw": 8},
    "full": {"batch": 8, "in_channels": 32, "out_channels": 64, "groups": 8, "depth": 32, "hw": 64},
}


def get_inputs(size: str = "full") -> list[torch.Tensor]:
    s = SIZES[size]
    return [torch.randn(s["batch"], s["in_channels"], s["depth"], s["hw"], s["hw"])]


def get_init_inputs(size: str = "full") -> list:
    s = SIZES[size]
    return [s["in_channels"], s["out_channels"], s["groups"]]


def flops(size: str = "full") -> int:
    s = SIZES[size]
    out = s["batch"] * s["out_channels"] * s["depth"] * s["hw"] ** 2
    return 2 * out * s["in_channels"] * 27 + 2 * out + 8 * out  # conv+bias, relu, norm


def bytes_moved(size: str = "full") -> int:
    s = SIZES[size]
    n, ci, co = s["batch"], s["in_channels"], s["out_channels"]
    vox = s["depth"] * s["hw"] ** 2
    return 4 * (n * ci * vox + co * ci * 27 + co + 2 * co + n * co * vox)
