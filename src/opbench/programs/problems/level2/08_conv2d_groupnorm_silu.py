"""Conv2d, GroupNorm, SiLU: the convolution unit of a diffusion U-Net's ResNet block.

Full: 77 GFLOP of convolution, ~1.5 ms on an H100 (float32), plus the norm's passes.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, groups: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1)
        self.norm = nn.GroupNorm(groups, out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(self.norm(self.conv(x)))


SIZES = {
    "small": {"batch": 2, "in_channels": 4, "out_channels": 8, "groups": 2, "hw": 16},
    "full": {"batch": 32, "in_channels": 64, "out_channels": 128, "groups": 16, "hw": 128},
}


def get_inputs(size: str = "full") -> list[torch.Tensor]:
    s = SIZES[size]
    return [torch.randn(s["batch"], s["in_channels"], s["hw"], s["hw"])]


def get_init_inputs(size: str = "full") -> list:
    s = SIZES[size]
    return [s["in_channels"], s["out_channels"], s["groups"]]


def flops(size: str = "full") -> int:
    s = SIZES[size]
    out = s["batch"] * s["out_channels"] * s["hw"] ** 2
    return 2 * out * s["in_channels"] * 9 + out + 8 * out + 4 * out  # conv+bias, norm, silu


def bytes_moved(size: str = "full") -> int:
    s = SIZES[size]
    n, ci, co, px = s["batch"], s["in_channels"], s["out_channels"], s["hw"] ** 2
    return 4 * (n * ci * px + co * ci * 9 + co + 2 * co + n * co * px)
