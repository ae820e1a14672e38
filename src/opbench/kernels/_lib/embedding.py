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

import os

import torch
import triton
import triton.language as tl

from opbench.kernels._lib.launch import Launcher, cdiv

__all__ = ["embedding", "embedding_dense_backward"]

_INTERPRETING = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")

#: Widest column block; wider rows take several column blocks.
MAX_BLOCK_D = 512 if not _INTERPRETING else 65536
#: Elements per program tile (indices x columns): 4096 = 16 KB of f32 rows per program.
TILE = 4096 if not _INTERPRETING else 65536
#: Elements per program of the flat count and cast kernels.
FLAT_BLOCK = 1024 if not _INTERPRETING else 65536


@triton.jit(do_not_specialize=["n_idx", "V", "D", "w_s0", "w_s1", "n_dblocks"])
def _embedding_kernel(
    w_ptr, idx_ptr, out_ptr, flag_ptr,
    n_idx: tl.int64, V: tl.int64, D: tl.int64, w_s0: tl.int64, w_s1: tl.int64,
    n_dblocks: tl.int64,
    CHECK: tl.constexpr, BLOCK_I: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0).to(tl.int64)
    pid_d = pid % n_dblocks
    pid_i = pid // n_dblocks
    ii = pid_i * BLOCK_I + tl.arange(0, BLOCK_I)
    imask = ii < n_idx
    dd = pid_d * BLOCK_D + tl.arange(0, BLOCK_D)
    dmask = dd < D
    idx = tl.load(idx_ptr + ii, mask=imask, other=0).to(tl.int64)
    valid = imask & (idx >= 0) & (idx < V)
    if CHECK:
        tl.store(flag_ptr + ii * 0, tl.full([BLOCK_I], 1, tl.int32), mask=imask & ~valid)
    rows = tl.load(
        w_ptr + idx[:, None] * w_s0 + dd[None, :] * w_s1,
        mask=valid[:, None] & dmask[None, :],
        other=0,
    )
    tl.store(out_ptr + ii[:, None] * D + dd[None, :], rows, mask=imask[:, None] & dmask[None, :])


@triton.jit(do_not_specialize=["n_idx", "V"])
def _count_kernel(idx_ptr, cnt_ptr, n_idx: tl.int64, V: tl.int64, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    ii = pid * BLOCK + tl.arange(0, BLOCK)
    imask = ii < n_idx
    idx = tl.load(idx_ptr + ii, mask=imask, other=0).to(tl.int64)
    valid = imask & (idx >= 0) & (idx < V)
    tl.atomic_add(cnt_ptr + idx, tl.full([BLOCK], 1, tl.int32), mask=valid)


@triton.jit(do_not_specialize=["n_idx", "V", "D", "padding_idx", "n_dblocks"])
def _embedding_bwd_kernel(
    g_ptr, idx_ptr, cnt_ptr, acc_ptr,
    n_idx: tl.int64, V: tl.int64, D: tl.int64, padding_idx: tl.int64, n_dblocks: tl.int64,
    SCALE: tl.constexpr, COMPUTE: tl.constexpr, BLOCK_I: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0).to(tl.int64)
    pid_d = pid % n_dblocks
    pid_i = pid // n_dblocks
    ii = pid_i * BLOCK_I + tl.arange(0, BLOCK_I)
    imask = ii < n_idx
    dd = pid_d * BLOCK_D + tl.arange(0, BLOCK_D)
    dmask = dd < D
    idx = tl.load(idx_ptr + ii, mask=imask, other=0).to(tl.int64)
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
    block_d = min(triton.next_power_of_2(max(D, 1)), MAX_BLOCK_D)
    return max(1, TILE // block_d), block_d


def _flat_indices(indices: torch.Tensor) -> torch.Tensor:
    if indices.dtype not in (torch.int64, torch.int32):
        raise RuntimeError(
            "Expected tensor for argument #1 'indices' to have one of the following scalar "
            f"types: Long, Int; but got {indices.dtype} instead"
        )
    return indices.contiguous().view(-1)


def embedding(
    weight: torch.Tensor,
    indices: torch.Tensor,
    padding_idx: int = -1,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> torch.Tensor:
    """aten::embedding: ``weight[indices]`` (padding_idx, scale_grad_by_freq and sparse
    only matter to the backward)."""
    if weight.dim() != 2:
        raise RuntimeError("'weight' must be 2-D")
    idx = _flat_indices(indices)
    V, D = weight.shape
    out = torch.empty((*indices.shape, D), dtype=weight.dtype, device=weight.device)
    n_idx = idx.numel()
    if n_idx == 0 or D == 0:
        return out
    check = _INTERPRETING or weight.device.type == "cpu"
    flag = torch.zeros((1,), dtype=torch.int32, device=weight.device) if check else idx
    block_i, block_d = _blocks(D)
    n_dblocks = cdiv(D, block_d)
    _embedding(
        (cdiv(n_idx, block_i) * n_dblocks,),
        (weight, idx, out, flag, n_idx, V, D, weight.stride(0), weight.stride(1), n_dblocks),
        CHECK=check, BLOCK_I=block_i, BLOCK_D=block_d,
    )  # fmt: skip
    if check and int(flag.numpy()[0]) != 0:
        raise IndexError("index out of range in self")
    return out


def embedding_dense_backward(
    grad_output: torch.Tensor,
    indices: torch.Tensor,
    num_weights: int,
    padding_idx: int,
    scale_grad_by_freq: bool,
) -> torch.Tensor:
    """aten::embedding_dense_backward: the ``[num_weights, D]`` gradient of the weight."""
    idx = _flat_indices(indices)
    n_idx = idx.numel()
    D = grad_output.shape[-1] if grad_output.dim() > 0 else 1
    dtype = grad_output.dtype
    if dtype == torch.float64:
        compute, acc_dtype = tl.float64, torch.float64
    elif dtype in (torch.float16, torch.bfloat16, torch.float32):
        compute, acc_dtype = tl.float32, torch.float32
    else:
        raise NotImplementedError(f"embedding_dense_backward on {dtype}")
    dev = grad_output.device
    acc = torch.zeros((num_weights, D), dtype=acc_dtype, device=dev)
    if n_idx == 0 or D == 0 or num_weights == 0:
        return acc if acc_dtype == dtype else torch.zeros((num_weights, D), dtype=dtype, device=dev)
    if grad_output.numel() != n_idx * D:
        raise RuntimeError("grad_output must have indices.shape + [D] elements")
    g = grad_output.contiguous().view(-1)
    cnt = idx
    if scale_grad_by_freq:
        cnt = torch.zeros((num_weights,), dtype=torch.int32, device=dev)
        _count((cdiv(n_idx, FLAT_BLOCK),), (idx, cnt, n_idx, num_weights), BLOCK=FLAT_BLOCK)
    block_i, block_d = _blocks(D)
    n_dblocks = cdiv(D, block_d)
    _embedding_bwd(
        (cdiv(n_idx, block_i) * n_dblocks,),
        (g, idx, cnt, acc, n_idx, num_weights, D, int(padding_idx), n_dblocks),
        SCALE=bool(scale_grad_by_freq), COMPUTE=compute, BLOCK_I=block_i, BLOCK_D=block_d,
    )  # fmt: skip
    if acc_dtype == dtype:
        return acc
    out = torch.empty((num_weights, D), dtype=dtype, device=dev)
    n = out.numel()
    _cast((cdiv(n, FLAT_BLOCK),), (acc, out, n), BLOCK=FLAT_BLOCK)
    return out
