"""A Mamba (S6) block in plain PyTorch: projections, a causal depthwise conv, and the
selective scan written as a loop over time.

The scan is sequential (h_t = exp(dt A) h_{t-1} + dt B x_t): eager launches ~4 kernels per
step. Full: batch 8, 512 steps, width 512 (inner 1024, state 16): 14 GFLOP, but ~2,000
launches make eager ~10 ms on an H100.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, d_model: int, d_state: int, expand: int, d_conv: int, dt_rank: int) -> None:
        super().__init__()
        inner = expand * d_model
        self.dt_rank, self.d_state = dt_rank, d_state
        self.in_proj = nn.Linear(d_model, 2 * inner, bias=False)
        self.conv = nn.Conv1d(inner, inner, d_conv, groups=inner, padding=d_conv - 1)
        self.x_proj = nn.Linear(inner, dt_rank + 2 * d_state, bias=False)
        self.dt_proj = nn.Linear(dt_rank, inner)
        # S4D-real initialisation: A = -(1, 2, ..., d_state) for every channel
        a = torch.arange(1, d_state + 1, dtype=torch.float32).repeat(inner, 1)
        self.A_log = nn.Parameter(torch.log(a))
        self.D = nn.Parameter(torch.ones(inner))
        self.out_proj = nn.Linear(inner, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        length = x.shape[1]
        xs, z = self.in_proj(x).chunk(2, dim=-1)  # (b, l, inner) each
        xs = F.silu(self.conv(xs.transpose(1, 2))[..., :length].transpose(1, 2))  # causal conv
        dt, b_sel, c_sel = self.x_proj(xs).split([self.dt_rank, self.d_state, self.d_state], -1)
        dt = F.softplus(self.dt_proj(dt))  # (b, l, inner)
        decay = torch.exp(dt.unsqueeze(-1) * -torch.exp(self.A_log))  # (b, l, inner, state)
        drive = (dt * xs).unsqueeze(-1) * b_sel.unsqueeze(2)  # (b, l, inner, state)
        h = torch.zeros_like(decay[:, 0])
        ys = []
        for t in range(length):
            h = decay[:, t] * h + drive[:, t]
            ys.append(torch.einsum("bdn,bn->bd", h, c_sel[:, t]))
        y = torch.stack(ys, dim=1) + xs * self.D
        return self.out_proj(y * F.silu(z))


SIZES = {
    "small": {
        "batch": 2,
        "seq": 8,
        "d_model": 16,
        "d_state": 4,
        "expand": 2,
        "d_conv": 4,
        "dt_rank": 4,
    },
    "full": {
        "batch": 8,
        "seq": 512,
        "d_model": 512,
        "d_state": 16,
        "expand": 2,
        "d_conv": 4,
        "dt_rank": 32,
    },
}
_ARGS = ("d_model", "d_state", "expand", "d_conv", "dt_rank")


def get_inputs(size: str = "full") -> list[torch.Tensor]:
    s = SIZES[size]
    return [torch.randn(s["batch"], s["seq"], s["d_model"])]


def get_init_inputs(size: str = "full") -> list:
    return [SIZES[size][k] for k in _ARGS]


def flops(size: str = "full") -> int:
    s = SIZES[size]
    tokens, d, n, r = s["batch"] * s["seq"], s["d_model"], s["d_state"], s["dt_rank"]
    inner = s["expand"] * d
    projections = 2 * tokens * (d * 2 * inner + inner * (r + 2 * n) + r * inner + inner * d)
    conv = 2 * tokens * inner * s["d_conv"] + tokens * inner + 4 * tokens * inner  # +bias, silu
    dt = tokens * inner + 3 * tokens * inner  # bias, softplus
    # decay (mul, exp), drive (2 muls), the recurrence (mul, add), the readout (mul, add)
    scan = 8 * tokens * inner * n + 2 * inner * n
    tail = 2 * tokens * inner + 5 * tokens * inner  # skip term D*x; silu gate and product
    return projections + conv + dt + scan + tail


def bytes_moved(size: str = "full") -> int:
    s = SIZES[size]
    tokens, d, n, r = s["batch"] * s["seq"], s["d_model"], s["d_state"], s["dt_rank"]
    inner = s["expand"] * d
    params = (
        d * 2 * inner
        + inner * s["d_conv"]
        + inner
        + inner * (r + 2 * n)
        + r * inner
        + inner
        + inner * n
        + inner
        + inner * d
    )
    return 4 * (2 * tokens * d + params)
