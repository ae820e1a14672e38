"""3x3 average pooling, stride 1, padding 1 (a blur that keeps the spatial size).

Full: batch=192 (3,221 MB moved, 4.0 GFLOP), ~1.07 ms at ~3 TB/s on an
H100 (memory-bound: about 1 ms of traffic at the copy bandwidth).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.avg_pool2d(x, kernel_size=3, stride=1, padding=1)


SIZES = {
    "small": {"batch": 2, "channels": 4, "hw": 16},
    "full": {"batch": 192, "channels": 128, "hw": 128},
}


def get_inputs(size: str = "full") -> list[torch.Tensor]:
    s = SIZES[size]
    return [torch.randn(s["batch"], s["channels"], s["hw"], s["hw"])]


def get_init_inputs(size: str = "full") -> list:
    return []


def flops(size: str = "full") -> int:
    s = SIZES[size]
    return 10 * s["batch"] * s["channels"] * s["hw"] ** 2  # 9 adds and a divide per output


def bytes_moved(size: str = "full") -> int:
    s = SIZES[size]
    return 4 * 2 * s["batch"] * s["channels"] * s["hw"] ** 2
