"""Trick (GPU only): do the (correct) work on a private side stream and return at once,
without making the caller's stream wait. Events recorded on the caller's stream then
see almost nothing, so a naive timer reports a huge speedup. Expected: the result is
correct (the judge synchronises the device before comparing), the timing engine flags
``side_stream_suspect`` and times it with a device-wide synchronise instead, so the
speedup is not above ~1."""

import torch
import triton
import triton.language as tl

_side = None


@triton.jit
def _sub(a_ptr, b_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(a_ptr + offs, mask=m)
    b = tl.load(b_ptr + offs, mask=m)
    tl.store(out_ptr + offs, a - alpha * b, mask=m)


def sub__Tensor_kernel_impl(a, b, *, alpha=1):
    global _side
    if not (isinstance(b, torch.Tensor) and a.shape == b.shape and a.dtype == b.dtype):
        raise NotImplementedError("same-shape, same-dtype tensors only")
    if _side is None:
        _side = torch.cuda.Stream(device=a.device)
    a, b = a.contiguous(), b.contiguous()
    out = torch.empty_like(a)
    n = a.numel()
    # The side stream waits for the inputs, but nobody waits for the side stream.
    _side.wait_stream(torch.cuda.current_stream(a.device))
    with torch.cuda.stream(_side):
        _sub[(triton.cdiv(n, 1024),)](a, b, out, n, alpha, BLOCK=1024)
    return out
