"""Pre-norm residual step in one pass: ``h = x + residual`` and ``RMSNorm(h)`` written
together; each program owns one row and reads both inputs once (as float32)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _add_rmsnorm(x_ptr, r_ptr, w_ptr, out_ptr, h_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(r_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    h = x + r
    h_out = h.to(h_ptr.dtype.element_ty)
    tl.store(h_ptr + row * n_cols + cols, h_out, mask=mask)
    h = h_out.to(tl.float32)  # the norm sees the stored sum, as eager's does
    rstd = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * n_cols + cols, (h * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.norm = nn.RMSNorm(hidden, eps=1e-6)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        n = x.shape[-1]
        if not (x.is_contiguous() and residual.is_contiguous() and x.shape == residual.shape):
            raise NotImplementedError("contiguous same-shape inputs only")
        h, out = torch.empty_like(x), torch.empty_like(x)
        rows = x.numel() // n if n else 0
        if rows:
            block = triton.next_power_of_2(n)
            warps = 4 if block <= 1024 else 8 if block <= 4096 else 16
            eps = self.norm.eps if self.norm.eps is not None else torch.finfo(x.dtype).eps
            _add_rmsnorm[(rows,)](
                x, residual, self.norm.weight, out, h, n, eps, BLOCK=block, num_warps=warps
            )
        return out, h
