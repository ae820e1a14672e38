"""3-d transposed convolution, kernel 3, stride 2 (padding 1, output padding 1): 2x upsampling.

Full: 2 * 12 * 128 * (16*32*32) * 64 * 27 = 87 GFLOP; eager (cuDNN, TF32 by default)
took 0.85 ms at batch 8 on an H100, so about 1.3 ms here.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.deconv = nn.ConvTranspose3d(
            in_channels, out_channels, 3, stride=2, padding=1, output_padding=1
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.deconv(x)


SIZES = {
    "small": {"batch": 1, "in_channels": 8, "out_channels": 4, "depth": 4, "hw": 6},
    "full": {"batch": 12, "in_channels": 128, "out_channels": 64, "depth": 16, "hw": 32},
}


def get_inputs(size: str = "full") -> list[torch.Tensor]:
    s = SIZES[size]
    return [torch.randn(s["batch"], s["in_channels"], s["depth"], s["hw"], s["hw"])]


def get_init_inputs(size: str = "full") -> list:
    s = SIZES[size]
    return [s["in_channels"], s["out_channels"]]


def flops(size: str = "full") -> int:
    s = SIZES[size]
    n, ci, co = s["batch"], s["in_channels"], s["out_channels"]
    vox = s["depth"] * s["hw"] ** 2
    return 2 * n * ci * vox * co * 27 + n * co * 8 * vox


def bytes_moved(size: str = "full") -> int:
    s = SIZES[size]
    n, ci, co = s["batch"], s["in_channels"], s["out_channels"]
    vox = s["depth"] * s["hw"] ** 2
    return 4 * (n * ci * vox + ci * co * 27 + co + n * co * 8 * vox)
