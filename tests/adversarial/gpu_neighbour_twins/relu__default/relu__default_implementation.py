"""Honest twin (GPU) of the neighbour corpus's Triton relu: the same kernel, no thread.
Must pass with its usual speedup (1.01x on an H100 when the neighbour was found)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(out_ptr + offs, tl.where(x > 0, x, 0), mask=m)


def relu__default_kernel_impl(x):
    if not x.is_cuda or not x.is_floating_point():
        raise NotImplementedError("CUDA float tensors only")
    x = x.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    if n:
        _relu[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
    return out
