"""BatchNorm2d with batch statistics (training-mode normalisation, no running stats).

No running statistics are kept, so forward has no side effects and its result depends
only on the batch. Full: 64 x 128 x 112 x 112 (411 MB), ~0.27 ms at ~3 TB/s on an H100.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.norm = nn.BatchNorm2d(channels, track_running_stats=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


SIZES = {
    "small": {"batch": 4, "channels": 8, "hw": 12},
    "full": {"batch": 256, "channels": 128, "hw": 112},
}


def get_inputs(size: str = "full") -> list[torch.Tensor]:
    s = SIZES[size]
    return [torch.randn(s["batch"], s["channels"], s["hw"], s["hw"]) * 3 - 1]


def get_init_inputs(size: str = "full") -> list:
    return [SIZES[size]["channels"]]


def flops(size: str = "full") -> int:
    s = SIZES[size]
    return 8 * s["batch"] * s["channels"] * s["hw"] ** 2


def bytes_moved(size: str = "full") -> int:
    s = SIZES[size]
    return 4 * (2 * s["batch"] * s["channels"] * s["hw"] ** 2 + 2 * s["channels"])
