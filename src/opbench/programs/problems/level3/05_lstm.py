"""Two-layer LSTM over a batch of sequences (batch first), returning every step's hidden state.

The time steps are sequential, so eager time is far above the FLOP bound. Full: batch 64,
256 steps, 256 -> 512 hidden: 120 GFLOP; cuDNN float32, several ms on an H100.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, input_size: int, hidden: int, layers: int) -> None:
        super().__init__()
        self.lstm = nn.LSTM(input_size, hidden, num_layers=layers, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        output, _ = self.lstm(x)
        return output


SIZES = {
    "small": {"batch": 2, "seq": 8, "input_size": 8, "hidden": 16, "layers": 2},
    "full": {"batch": 64, "seq": 256, "input_size": 256, "hidden": 512, "layers": 2},
}


def get_inputs(size: str = "full") -> list[torch.Tensor]:
    s = SIZES[size]
    return [torch.randn(s["batch"], s["seq"], s["input_size"])]


def get_init_inputs(size: str = "full") -> list:
    s = SIZES[size]
    return [s["input_size"], s["hidden"], s["layers"]]


def _layer_inputs(size: str) -> list[int]:
    s = SIZES[size]
    return [s["input_size"]] + [s["hidden"]] * (s["layers"] - 1)


def flops(size: str = "full") -> int:
    s = SIZES[size]
    b, t, h = s["batch"], s["seq"], s["hidden"]
    # per step and layer: the gate GEMMs, two bias adds, then ~15 pointwise ops per unit
    # (three sigmoids, two tanh, three products, one sum)
    per_step = [2 * b * 4 * h * (i + h) + 2 * b * 4 * h + 15 * b * h for i in _layer_inputs(size)]
    return t * sum(per_step)


def bytes_moved(size: str = "full") -> int:
    s = SIZES[size]
    b, t, h = s["batch"], s["seq"], s["hidden"]
    params = sum(4 * h * (i + h) + 2 * 4 * h for i in _layer_inputs(size))
    return 4 * (b * t * s["input_size"] + params + b * t * h)
