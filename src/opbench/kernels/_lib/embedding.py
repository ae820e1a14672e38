"""Embedding lookup and its dense backward: Triton kernels, their launchers and the entry
points that follow ATen's schemas (``embedding``, ``embedding_dense_backward``).

* ``embedding``: a gather of weight rows, ``out[i, :] = weight[indices[i], :]``, over tiles
  of ``BLOCK_I`` indices x ``BLOCK_D`` columns (a bit-exact copy: no conversion, so any
  dtype). Out-of-range indices: eager raises ``IndexError`` on the CPU and fails a
  device-side assert on CUDA. The kernel never reads outside the weight (such rows come
  out as zeros); under Triton's interpreter (CPU tensors) it also sets a flag that the
  host reads back to raise eager's ``IndexError``. On the GPU there is no check (a
  read-back would synchronize every call).
* ``embedding_dense_backward``: rows of ``grad_output`` scatter-added into a
  ``[num_weights, D]`` accumulator with atomics (float32 for f16/bf16/f32 gradients,
  float64 for f64), skipping ``padding_idx`` and out-of-range indices (eager's CPU kernel
  skips those too), then cast to the gradient's dtype. ``scale_grad_by_freq`` divides
  each row by how often its index occurs (counted with integer atomics first).
"""

from __future__ import annotations

import math
import os
from typing import Any

import torch
import triton
import triton.language as tl

from opbench.kernels._lib.launch import Launcher, cdiv, next_pow2, remember
from opbench.kernels._lib.reduction import merge_side, offsets, side_args

__all__ = ["embedding", "embedding_dense_backward"]

_INTERPRETING = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")

#: Widest column block; wider rows take several column blocks.
MAX_BLOCK_D = 512 if not _INTERPRETING else 65536
#: Elements per program tile (indices x columns): 4096 = 16 KB of f32 rows per program.
TILE = 4096 if not _INTERPRETING else 65536
#: Elements per program of the flat count and cast kernels.
FLAT_BLOCK = 1024 if not _INTERPRETING else 65536


@triton.jit(do_not_specialize=["n_idx", "V", "D", "w_s0", "w_s1", "n_dblocks", "id1", "is0", "is1"])
def _embedding_kernel(
    w_ptr, idx_ptr, out_ptr, flag_ptr,
    n_idx: tl.int64, V: tl.int64, D: tl.int64, w_s0: tl.int64, w_s1: tl.int64,
    n_dblocks: tl.int64, id1: tl.int64, is0: tl.int64, is1: tl.int64,
    CHECK: tl.constexpr, BLOCK_I: tl.constexpr, BLOCK_D: tl.constexpr, IMODE: tl.constexpr,
):  # fmt: skip
    """``IMODE``/``id1``/``is0``/``is1``: the indices' layout (:func:`reduction.offsets`),
    so strided indices are read in place instead of copied contiguous first."""
    pid = tl.program_id(0).to(tl.int64)
    pid_d = pid % n_dblocks
    pid_i = pid // n_dblocks
    ii = pid_i * BLOCK_I + tl.arange(0, BLOCK_I)
    imask = ii < n_idx
    dd = pid_d * BLOCK_D + tl.arange(0, BLOCK_D)
    dmask = dd < D
    idx_off = offsets(ii, id1, is0, is1, IMODE)
    idx = tl.load(idx_ptr + idx_off, mask=imask, other=0).to(tl.int64)
    valid = imask & (idx >= 0) & (idx < V)
    if CHECK:
        tl.store(flag_ptr + ii * 0, tl.full([BLOCK_I], 1, tl.int32), mask=imask & ~valid)
    rows = tl.load(
        w_ptr + idx[:, None] * w_s0 + dd[None, :] * w_s1,
        mask=valid[:, None] & dmask[None, :],
        other=0,
    )
    tl.store(out_ptr + ii[:, None] * D + dd[None, :], rows, mask=imask[:, None] & dmask[None, :])


@triton.jit(do_not_specialize=["n_idx", "V", "id1", "is0", "is1"])
def _count_kernel(
    idx_ptr, cnt_ptr, n_idx: tl.int64, V: tl.int64, id1: tl.int64, is0: tl.int64,
    is1: tl.int64, BLOCK: tl.constexpr, IMODE: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0).to(tl.int64)
    ii = pid * BLOCK + tl.arange(0, BLOCK)
    imask = ii < n_idx
    idx = tl.load(idx_ptr + offsets(ii, id1, is0, is1, IMODE), mask=imask, other=0).to(tl.int64)
    valid = imask & (idx >= 0) & (idx < V)
    tl.atomic_add(cnt_ptr + idx, tl.full([BLOCK], 1, tl.int32), mask=valid)


@triton.jit(do_not_specialize=["n_idx", "V", "D", "padding_idx", "n_dblocks", "id1", "is0", "is1"])
def _embedding_bwd_kernel(
    g_ptr, idx_ptr, cnt_ptr, acc_ptr,
    n_idx: tl.int64, V: tl.int64, D: tl.int64, padding_idx: tl.int64, n_dblocks: tl.int64,
    id1: tl.int64, is0: tl.int64, is1: tl.int64,
    SCALE: tl.constexpr, COMPUTE: tl.constexpr, BLOCK_I: tl.constexpr, BLOCK_D: tl.constexpr,
    IMODE: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0).to(tl.int64)
    pid_d = pid % n_dblocks
    pid_i = pid // n_dblocks
    ii = pid_i * BLOCK_I + tl.arange(0, BLOCK_I)
    imask = ii < n_idx
    dd = pid_d * BLOCK_D + tl.arange(0, BLOCK_D)
    dmask = dd < D
    idx = tl.load(idx_ptr + offsets(ii, id1, is0, is1, IMODE), mask=imask, other=0).to(tl.int64)
    valid = imask & (idx >= 0) & (idx < V) & (idx != padding_idx)
    mask = valid[:, None] & dmask[None, :]
    g = tl.load(g_ptr + ii[:, None] * D + dd[None, :], mask=mask, other=0.0).to(COMPUTE)
    if SCALE:
        cnt = tl.load(cnt_ptr + idx, mask=valid, other=1).to(COMPUTE)
        g = g / cnt[:, None]
    tl.atomic_add(acc_ptr + idx[:, None] * D + dd[None, :], g, mask=mask)


@triton.jit(do_not_specialize=["n"])
def _cast_kernel(src_ptr, dst_ptr, n: tl.int64, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(src_ptr + offs, mask=mask, other=0.0)
    tl.store(dst_ptr + offs, x.to(dst_ptr.dtype.element_ty), mask=mask)


_embedding = Launcher(_embedding_kernel)
_count = Launcher(_count_kernel)
_embedding_bwd = Launcher(_embedding_bwd_kernel)
_cast = Launcher(_cast_kernel)


def _blocks(D: int) -> tuple[int, int]:
    """(BLOCK_I, BLOCK_D) for rows of D elements."""
    block_d = min(next_pow2(D), MAX_BLOCK_D)
    return max(1, TILE // block_d), block_d


def _check_indices(indices: torch.Tensor) -> None:
    if indices.dtype not in (torch.int64, torch.int32):
        raise RuntimeError(
            "Expected tensor for argument #1 'indices' to have one of the following scalar "
            f"types: Long, Int; but got {indices.dtype} instead"
        )


def _index_layout(indices: torch.Tensor) -> tuple[bool, tuple[int, int, int], int]:
    """``(copy first, (d1, s0, s1), IMODE)``: the kernels read the indices in their own
    layout where it merges to at most two dims (a ``[16, 512]`` slice of stride
    ``(2048, 4)`` is one dim of stride 4), else from a contiguous copy."""
    args = side_args(*merge_side(list(indices.shape), list(indices.stride())))
    if args is None:
        return True, (1, 1, 0), 0
    mode, d1, s0, s1 = args
    return False, (d1, s0, s1), mode


#: (weight layout, dtype and CPU-ness, indices layout and dtype) -> ``(output shape,
#: output strides, launch or None)`` for :func:`embedding`; (grad layout and dtype,
#: indices layout and dtype, num_weights, padding_idx, scale_grad_by_freq) -> the plan of
#: :func:`embedding_dense_backward`. A repeat call checks nothing again and only
#: allocates and launches: ``embedding`` 11.7-18.5 -> 6.1 us of Python a call on its 4
#: traced cases (launches stubbed, CPU, where 2 us of it is the CPU-only index check;
#: ``benchmarks/host_profile.py --python-only``), the strided-index case without its copy.
_PLANS: dict[tuple, Any] = {}


def embedding(
    weight: torch.Tensor,
    indices: torch.Tensor,
    padding_idx: int = -1,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> torch.Tensor:
    """aten::embedding: ``weight[indices]`` (padding_idx, scale_grad_by_freq and sparse
    only matter to the backward)."""
    key = (weight.shape, weight.stride(), weight.dtype, weight.is_cpu, indices.shape,
           indices.stride(), indices.dtype)  # fmt: skip
    plan = _PLANS.get(key)
    if plan is None:
        plan = remember(_PLANS, key, _embedding_plan(weight, indices))
    shape, stride, launch = plan
    out = torch.empty_strided(shape, stride, dtype=weight.dtype, device=weight.device)
    if launch is None:
        return out
    grid, tail, consts, copy = launch
    idx = indices.contiguous() if copy else indices
    check = consts["CHECK"]
    flag = torch.zeros((1,), dtype=torch.int32, device=weight.device) if check else idx
    _embedding(grid, (weight, idx, out, flag, *tail), **consts)
    if check and int(flag.numpy()[0]) != 0:
        raise IndexError("index out of range in self")
    return out


def _embedding_plan(weight: torch.Tensor, indices: torch.Tensor) -> tuple:
    if weight.dim() != 2:
        raise RuntimeError("'weight' must be 2-D")
    _check_indices(indices)
    V, D = weight.shape
    shape = (*indices.shape, D)
    stride = tuple(math.prod(shape[i + 1 :]) for i in range(len(shape)))
    n_idx = indices.numel()
    if n_idx == 0 or D == 0:
        return shape, stride, None
    check = _INTERPRETING or weight.device.type == "cpu"
    copy, (id1, is0, is1), imode = _index_layout(indices)
    block_i, block_d = _blocks(D)
    n_dblocks = cdiv(D, block_d)
    grid = (cdiv(n_idx, block_i) * n_dblocks,)
    tail = (n_idx, V, D, weight.stride(0), weight.stride(1), n_dblocks, id1, is0, is1)
    consts = dict(CHECK=check, BLOCK_I=block_i, BLOCK_D=block_d, IMODE=imode)
    return shape, stride, (grid, tail, consts, copy)


def embedding_dense_backward(
    grad_output: torch.Tensor,
    indices: torch.Tensor,
    num_weights: int,
    padding_idx: int,
    scale_grad_by_freq: bool,
) -> torch.Tensor:
    """aten::embedding_dense_backward: the ``[num_weights, D]`` gradient of the weight."""
    key = (grad_output.shape, grad_output.stride(), grad_output.dtype, indices.shape,
           indices.stride(), indices.dtype, num_weights, padding_idx, scale_grad_by_freq)  # fmt: skip
    plan = _PLANS.get(key)
    if plan is None:
        plan = remember(
            _PLANS,
            key,
            _backward_plan(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq),
        )
    shape, acc_dtype, dtype, launch = plan
    dev = grad_output.device
    acc = torch.zeros(shape, dtype=acc_dtype, device=dev)
    if launch is None:
        return acc if acc_dtype == dtype else torch.zeros(shape, dtype=dtype, device=dev)
    grid, tail, consts, count, cast, copy_g, copy_idx = launch
    g = grad_output.contiguous() if copy_g else grad_output
    idx = indices.contiguous() if copy_idx else indices
    cnt = idx
    if count is not None:
        cnt = torch.zeros((num_weights,), dtype=torch.int32, device=dev)
        _count(count[0], (idx, cnt, *count[1]), **count[2])
    _embedding_bwd(grid, (g, idx, cnt, acc, *tail), **consts)
    if cast is None:
        return acc
    out = torch.empty(shape, dtype=dtype, device=dev)
    _cast(cast[0], (acc, out, cast[1]), BLOCK=FLAT_BLOCK)
    return out


def _backward_plan(
    grad_output: torch.Tensor, indices: torch.Tensor, num_weights: int, padding_idx: int,
    scale_grad_by_freq: bool,
) -> tuple:  # fmt: skip
    """``((num_weights, D), accumulate dtype, result dtype, launch or None)``; a launch:
    ``(grid, the gradient kernel's integers, its constexprs, the count kernel's (grid,
    integers, constexprs) or None, the cast kernel's (grid, n) or None, copy the gradient
    contiguous first, copy the indices contiguous first)``."""
    _check_indices(indices)
    n_idx = indices.numel()
    D = grad_output.shape[-1] if grad_output.dim() > 0 else 1
    dtype = grad_output.dtype
    if dtype == torch.float64:
        compute, acc_dtype = tl.float64, torch.float64
    elif dtype in (torch.float16, torch.bfloat16, torch.float32):
        compute, acc_dtype = tl.float32, torch.float32
    else:
        raise NotImplementedError(f"embedding_dense_backward on {dtype}")
    shape = (num_weights, D)
    if n_idx == 0 or D == 0 or num_weights == 0:
        return shape, acc_dtype, dtype, None
    if grad_output.numel() != n_idx * D:
        raise RuntimeError("grad_output must have indices.shape + [D] elements")
    copy_idx, (id1, is0, is1), imode = _index_layout(indices)
    count = None
    if scale_grad_by_freq:
        count = (
            (cdiv(n_idx, FLAT_BLOCK),),
            (n_idx, num_weights, id1, is0, is1),
            dict(BLOCK=FLAT_BLOCK, IMODE=imode),
        )
    block_i, block_d = _blocks(D)
    n_dblocks = cdiv(D, block_d)
    grid = (cdiv(n_idx, block_i) * n_dblocks,)
    tail = (n_idx, num_weights, D, int(padding_idx), n_dblocks, id1, is0, is1)
    consts = dict(
        SCALE=bool(scale_grad_by_freq), COMPUTE=compute, BLOCK_I=block_i, BLOCK_D=block_d,
        IMODE=imode,
    )  # fmt: skip
    n = num_weights * D
    cast = None if acc_dtype == dtype else ((cdiv(n, FLAT_BLOCK),), n)
    launch = (grid, tail, consts, count, cast, not grad_output.is_contiguous(), copy_idx)
    return shape, acc_dtype, dtype, launch
