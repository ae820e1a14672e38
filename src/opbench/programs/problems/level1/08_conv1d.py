"""1-d convolution with bias, 'same' padding (a sequence model's temporal conv).

Full: 2 * 24 * 256 * 16384 * 128 * 5 = 129 GFLOP; eager (cuDNN, TF32 by default) took
0.77 ms at batch 16 on an H100, so about 1.15 ms here.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int) -> None:
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


SIZES = {
    "small": {"batch": 2, "in_channels": 8, "out_channels": 16, "length": 64, "kernel_size": 5},
    "full": {
        "batch": 24,
        "in_channels": 128,
        "out_channels": 256,
        "length": 16384,
        "kernel_size": 5,
    },
}


def get_inputs(size: str = "full") -> list[torch.Tensor]:
    s = SIZES[size]
    return [torch.randn(s["batch"], s["in_channels"], s["length"])]


def get_init_inputs(size: str = "full") -> list:
    s = SIZES[size]
    return [s["in_channels"], s["out_channels"], s["kernel_size"]]


def flops(size: str = "full") -> int:
    s = SIZES[size]
    out = s["batch"] * s["out_channels"] * s["length"]
    return 2 * out * s["in_channels"] * s["kernel_size"] + out


def bytes_moved(size: str = "full") -> int:
    s = SIZES[size]
    n, ci, co, length, k = (
        s["batch"],
        s["in_channels"],
        s["out_channels"],
        s["length"],
        s["kernel_size"],
    )
    return 4 * (n * ci * length + co * ci * k + co + n * co * length)
