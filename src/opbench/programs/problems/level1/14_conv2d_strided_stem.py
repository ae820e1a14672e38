"""ResNet stem: 7x7 convolution, stride 2, padding 3, from 3 input channels.

Few input channels make the GEMM skinny. Full: 2 * 128 * 64 * 112^2 * 3 * 49 = 30 GFLOP
plus a 411 MB output, ~0.75 ms on an H100 (float32).
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 7, stride=2, padding=3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


SIZES = {
    "small": {"batch": 2, "in_channels": 3, "out_channels": 8, "hw": 32},
    "full": {"batch": 128, "in_channels": 3, "out_channels": 64, "hw": 224},
}


def get_inputs(size: str = "full") -> list[torch.Tensor]:
    s = SIZES[size]
    return [torch.randn(s["batch"], s["in_channels"], s["hw"], s["hw"])]


def get_init_inputs(size: str = "full") -> list:
    s = SIZES[size]
    return [s["in_channels"], s["out_channels"]]


def _out_hw(size: str) -> int:
    return (SIZES[size]["hw"] + 2 * 3 - 7) // 2 + 1


def flops(size: str = "full") -> int:
    s = SIZES[size]
    out = s["batch"] * s["out_channels"] * _out_hw(size) ** 2
    return 2 * out * s["in_channels"] * 49 + out


def bytes_moved(size: str = "full") -> int:
    s = SIZES[size]
    n, ci, co = s["batch"], s["in_channels"], s["out_channels"]
    return 4 * (n * ci * s["hw"] ** 2 + co * ci * 49 + co + n * co * _out_hw(size) ** 2)
