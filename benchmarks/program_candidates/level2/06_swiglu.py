"""SwiGLU: the two projections stay cuBLAS matmuls; ``silu(g) * u`` is one elementwise
pass over their outputs (eager writes silu(g) and reads it back for the product)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 2048


@triton.jit
def _silu_mul(g_ptr, u_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    g = tl.load(g_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(u_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = g / (1.0 + tl.exp(-g)) * u
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        g, u = self.gate(x), self.up(x)
        out = g  # written in place: g is not needed after its own element is read
        n = g.numel()
        if n:
            _silu_mul[(triton.cdiv(n, BLOCK),)](g, u, out, n, BLOCK=BLOCK, num_warps=8)
        return out
