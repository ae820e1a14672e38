"""Transposed convolution (kernel 4, stride 2) then tanh: a GAN generator's upsampling step.

Full: 2 * 48 * 256 * 64^2 * 64 * 16 = 103 GFLOP; eager (cuDNN, TF32 by default) took
0.75 ms at batch 32 on an H100, so about 1.1 ms here.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.deconv = nn.ConvTranspose2d(in_channels, out_channels, 4, stride=2, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.deconv(x))


SIZES = {
    "small": {"batch": 2, "in_channels": 8, "out_channels": 4, "hw": 8},
    "full": {"batch": 48, "in_channels": 256, "out_channels": 64, "hw": 64},
}


def get_inputs(size: str = "full") -> list[torch.Tensor]:
    s = SIZES[size]
    return [torch.randn(s["batch"], s["in_channels"], s["hw"], s["hw"])]


def get_init_inputs(size: str = "full") -> list:
    s = SIZES[size]
    return [s["in_channels"], s["out_channels"]]


def flops(size: str = "full") -> int:
    s = SIZES[size]
    n, ci, co, px = s["batch"], s["in_channels"], s["out_channels"], s["hw"] ** 2
    out = n * co * 4 * px
    return 2 * n * ci * px * co * 16 + out + 4 * out  # deconv, bias, tanh (~4)


def bytes_moved(size: str = "full") -> int:
    s = SIZES[size]
    n, ci, co, px = s["batch"], s["in_channels"], s["out_channels"], s["hw"] ** 2
    return 4 * (n * ci * px + ci * co * 16 + co + n * co * 4 * px)
