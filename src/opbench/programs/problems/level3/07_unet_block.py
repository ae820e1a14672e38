"""One U-Net level: double conv, downsample, double conv, transposed-conv upsample, skip
concatenation, double conv.

Full: 8 x 64 x 128^2 in, 64/128 channels: 65 GFLOP, ~1.5 ms on an H100 (float32).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


def double_conv(c_in: int, c_out: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(c_out, c_out, 3, padding=1),
        nn.ReLU(),
    )


class Model(nn.Module):
    def __init__(self, in_channels: int, base: int) -> None:
        super().__init__()
        self.encode = double_conv(in_channels, base)
        self.bottom = double_conv(base, 2 * base)
        self.up = nn.ConvTranspose2d(2 * base, base, 2, stride=2)
        self.decode = double_conv(2 * base, base)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skip = self.encode(x)
        y = self.up(self.bottom(F.max_pool2d(skip, 2)))
        return self.decode(torch.cat((y, skip), dim=1))


SIZES = {
    "small": {"batch": 1, "in_channels": 3, "base": 8, "hw": 16},
    "full": {"batch": 8, "in_channels": 64, "base": 64, "hw": 128},
}


def get_inputs(size: str = "full") -> list[torch.Tensor]:
    s = SIZES[size]
    return [torch.randn(s["batch"], s["in_channels"], s["hw"], s["hw"])]


def get_init_inputs(size: str = "full") -> list:
    s = SIZES[size]
    return [s["in_channels"], s["base"]]


def _convs(size: str) -> list[tuple[int, int, int, int, int]]:
    """(c_in, c_out, weight taps, taps per output pixel, output pixels per image) of every
    convolution; the 2x2 stride-2 transposed conv has 4 weight taps but each output pixel
    receives exactly one of them."""
    s = SIZES[size]
    c, b, full, low = s["in_channels"], s["base"], s["hw"] ** 2, (s["hw"] // 2) ** 2
    return [
        (c, b, 9, 9, full),
        (b, b, 9, 9, full),
        (b, 2 * b, 9, 9, low),
        (2 * b, 2 * b, 9, 9, low),
        (2 * b, b, 4, 1, full),
        (2 * b, b, 9, 9, full),
        (b, b, 9, 9, full),
    ]


def flops(size: str = "full") -> int:
    s = SIZES[size]
    n = s["batch"]
    convs = sum(
        2 * n * px * ci * co * taps + 2 * n * px * co for ci, co, _, taps, px in _convs(size)
    )
    return convs + n * s["base"] * s["hw"] ** 2  # convs with bias and relu; the pool's compares


def bytes_moved(size: str = "full") -> int:
    s = SIZES[size]
    params = sum(ci * co * w_taps + co for ci, co, w_taps, _, _ in _convs(size))
    n, px = s["batch"], s["hw"] ** 2
    return 4 * (n * s["in_channels"] * px + params + n * s["base"] * px)
