"""Trick (GPU only): a Triton kernel that writes far outside its output, an illegal
memory access that poisons the worker's CUDA context. Expected: crash, the worker is
replaced, and the tests after it (other ops, same worker slot) still pass; after
--max-crashes-per-op crashes the op's remaining tests are not run."""

import torch
import triton
import triton.language as tl


@triton.jit
def _wild_store(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    # 2**40 elements past the output: no allocation lives there.
    tl.store(out_ptr + offs + (1 << 40), tl.floor(x), mask=offs < n)


def floor__default_kernel_impl(x):
    out = torch.empty_like(x)
    n = x.numel()
    _wild_store[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
    return out
