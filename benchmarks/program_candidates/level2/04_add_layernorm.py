"""LN(x + residual) in one pass: each program owns one row, loads both inputs once (as
float32), and writes the normalised row; eager reads x and residual, writes the sum,
then reads it back for the norm's two passes."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _add_layernorm(x_ptr, r_ptr, w_ptr, b_ptr, out_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(r_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    h = x + r
    mean = tl.sum(h, axis=0) / n_cols
    d = tl.where(mask, h - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    y = d * rstd * w + b
    tl.store(out_ptr + row * n_cols + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(hidden)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        n = x.shape[-1]
        if not (x.is_contiguous() and residual.is_contiguous() and x.shape == residual.shape):
            raise NotImplementedError("contiguous same-shape inputs only")
        out = torch.empty_like(x)
        rows = x.numel() // n if n else 0
        if rows:
            block = triton.next_power_of_2(n)
            warps = 4 if block <= 1024 else 8 if block <= 4096 else 16
            _add_layernorm[(rows,)](
                x, residual, self.norm.weight, self.norm.bias, out, n, self.norm.eps,
                BLOCK=block, num_warps=warps,
            )  # fmt: skip
        return out
