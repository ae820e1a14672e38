"""2x2 max pooling, stride 2, over (N, C, H, W).

Full: batch=320 (3,355 MB moved, 0.7 GFLOP), ~1.12 ms at ~3 TB/s on an
H100 (memory-bound: about 1 ms of traffic at the copy bandwidth).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.max_pool2d(x, kernel_size=2, stride=2)


SIZES = {
    "small": {"batch": 2, "channels": 4, "hw": 16},
    "full": {"batch": 320, "channels": 128, "hw": 128},
}


def get_inputs(size: str = "full") -> list[torch.Tensor]:
    s = SIZES[size]
    return [torch.randn(s["batch"], s["channels"], s["hw"], s["hw"])]


def get_init_inputs(size: str = "full") -> list:
    return []


def flops(size: str = "full") -> int:
    s = SIZES[size]
    return s["batch"] * s["channels"] * s["hw"] ** 2  # one compare per input element


def bytes_moved(size: str = "full") -> int:
    s = SIZES[size]
    n, c, hw = s["batch"], s["channels"], s["hw"]
    return 4 * (n * c * hw * hw + n * c * (hw // 2) ** 2)
