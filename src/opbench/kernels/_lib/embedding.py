"""Embedding lookup and its dense backward: Triton kernels, their launchers and the entry
points that follow ATen's schemas (``embedding``, ``embedding_dense_backward``).

* ``embedding``: a gather of weight rows, ``out[i, :] = weight[indices[i], :]``, one
  launch over ``[BLOCK_I, BLOCK_D]`` tiles (indices x columns; a bit-exact copy: no
  conversion, so any dtype). The row length and the weight's row stride arrive divided
  by the vector width (:func:`reduction.vec_of`) and are multiplied back in the kernel,
  so the compiler sees rows that start on 16 bytes and issues 16-byte loads and stores
  (before, every f16 element moved alone: 7.9 us on the traced ``[512, 128]`` weight
  and ``[1, 512]`` indices, eager 4.8). ``BLOCK_D`` is the power of two that pads a row
  least (256 for D = 768: three full blocks, not a 512 and a half-empty one), and the
  tile shrinks until the grid has about two programs an SM (:data:`MIN_PROGRAMS`).
  Out-of-range indices: eager raises ``IndexError`` on the CPU and fails a device-side
  assert on CUDA. The kernel never reads outside the weight (such rows come out as
  zeros); under Triton's interpreter (CPU tensors) it also sets a flag that the host
  reads back to raise eager's ``IndexError``. On the GPU there is no check (a read-back
  would synchronize every call).
* ``embedding_dense_backward`` (``grad_weight[v] = sum of grad_output rows i with
  indices[i] == v``, skipping ``padding_idx`` and out-of-range indices as eager's CPU
  kernel does), two plans:

  - **owner** (f16/bf16 gradients, ``num_weights * len(indices) <=``
    :data:`DOT_MAX_PAIRS`; every small traced case): one launch, no scratch, no atomics,
    deterministic. Each program owns a ``[BLOCK_V, BLOCK_D]`` block of the result and
    walks all the indices ``BLOCK_N`` at a time: the indices that fall in its rows make a
    one-hot ``[BLOCK_V, BLOCK_N]`` matrix, and ``tl.dot(one_hot, grad_tile)`` adds their
    gradient rows on the tensor cores in float32 (exact products; rows of other programs
    are masked off the load, so each gradient row is read once per column block). The
    block is written once, in the gradient's dtype: rows no index hits come out zero
    without a fill. A one-hot zero times an Inf or NaN gradient would be NaN, so a
    program whose block ends up non-finite recomputes it with a plain loop over the
    indices (``where``, no products): only rows whose own gradients are non-finite stay
    so, as in eager. ``scale_grad_by_freq`` counts each row's hits from the same one-hot
    tile. Replaces fill + scatter + cast (1.25 + 24.6 + 1.9 us on the traced
    ``[1, 512, 768]`` gradient; eager 1.2 + 13.4).
  - **atomic** (float32/float64 gradients, or many rows times many indices: the traced
    ``[16, 512, 768]`` gradient into 1,024 rows): rows scatter-added with relaxed
    atomics into a zeroed ``[num_weights, D]`` accumulator (float32 for f16/bf16/f32,
    float64 for f64), then cast to the gradient's dtype by a vectorised flat kernel.
    ``scale_grad_by_freq`` divides each row by how often its index occurs (counted with
    integer atomics first). The atomics were Triton's default ``acq_rel`` on addresses
    the compiler could not prove contiguous (the row length was a plain runtime
    integer): one ordered ``atom.global.gpu.acq_rel.add.f32`` per element, the likely
    cause of 24.6 us for the 393K adds of the traced ``[1, 512, 768]`` gradient; now
    ``red.global.gpu.relaxed.add.v4.f32`` with 16-byte gradient loads. The owner
    kernel's gradient tiles go through ``cp.async`` 16-byte copies, pipelined, into
    ``wgmma`` (``BLOCK_V`` 64) or ``mma.sync`` (32). All read from the PTX that Triton
    3.9 writes for sm_90 on the CPU machine (``triton.compile`` of an ``ASTSource``
    with ``GPUTarget("cuda", 90, 32)``).
"""

from __future__ import annotations

import math
from typing import Any

import torch
import triton.language as tl

from opbench.kernels._lib.launch import INTERPRETING as _INTERPRETING
from opbench.kernels._lib.launch import Launcher, cdiv, jit_unspecialized, next_pow2, remember
from opbench.kernels._lib.native_launch import declare_replay
from opbench.kernels._lib.reduction import (
    _MAX_COMBINE,
    merge_side,
    offsets,
    row_sum,
    side_args,
    vec_of,
)

__all__ = ["embedding", "embedding_dense_backward"]


#: Widest column block of the gather and the atomic scatter; wider rows take several.
MAX_BLOCK_D = 512 if not _INTERPRETING else 65536
#: Largest tile (indices x columns) of the gather and the atomic scatter: 4,096 f16 =
#: 32 elements, four 16-byte vectors, a thread at 4 warps.
TILE = 4096 if not _INTERPRETING else 65536
#: Smallest tile: 1,024 = one 16-byte f16 vector a thread.
MIN_TILE = 1024 if not _INTERPRETING else 16
#: The tile halves (down to ``MIN_TILE``) while the grid has fewer programs than this:
#: about two an SM of the H100's 132, so small gathers are not a few long programs.
MIN_PROGRAMS = 264 if not _INTERPRETING else 1
#: Elements per program of the flat count and cast kernels.
FLAT_BLOCK = 2048 if not _INTERPRETING else 65536

#: The owner plan of the backward serves ``num_weights * len(indices)`` up to this (its
#: tensor-core work grows with the product, the atomic plan's with ``len(indices)``):
#: the traced ``512 x 512`` takes it, ``1024 x 8192`` (8.4M) stays atomic.
DOT_MAX_PAIRS = 1 << 20
#: Its tiles: rows of the result (``BLOCK_V``) and columns (``BLOCK_D``) a program
#: owns, indices a step (``BLOCK_N``); the row and column blocks halve down to
#: ``DOT_MIN_BLOCK`` while the grid has fewer than ``DOT_MIN_PROGRAMS`` programs.
DOT_BLOCK_V = 64
DOT_BLOCK_D = 128
DOT_BLOCK_N = 64 if not _INTERPRETING else 16
DOT_MIN_BLOCK = 32 if not _INTERPRETING else 16
DOT_MIN_PROGRAMS = 128 if not _INTERPRETING else 1


@jit_unspecialized
def _embedding_kernel(
    w_ptr, idx_ptr, out_ptr, flag_ptr,
    n_idx: tl.int64, V: tl.int64, Dq: tl.int64, w_s0q: tl.int64, w_s1: tl.int64,
    n_dblocks: tl.int64, id1: tl.int64, is0: tl.int64, is1: tl.int64,
    CHECK: tl.constexpr, VEC: tl.constexpr, W_ROWS: tl.constexpr, BLOCK_I: tl.constexpr,
    BLOCK_D: tl.constexpr, IMODE: tl.constexpr,
):  # fmt: skip
    """``Dq``, ``w_s0q``: the row length and the weight's row stride divided by ``VEC``
    (multiplied back here: known multiples of ``VEC``, so 16-byte loads and stores);
    ``W_ROWS``: the weight's rows are contiguous (``w_s1`` unused). ``IMODE``/``id1``/
    ``is0``/``is1``: the indices' layout (:func:`reduction.offsets`), so strided indices
    are read in place instead of copied contiguous first."""
    # Like embedding._embedding_bwd_kernel's opening, kept apart: kernel code, see there
    D = Dq * VEC
    pid = tl.program_id(0).to(tl.int64)
    pid_d = pid % n_dblocks
    pid_i = pid // n_dblocks
    ii = pid_i * BLOCK_I + tl.arange(0, BLOCK_I)
    imask = ii < n_idx
    dd = pid_d * BLOCK_D + tl.arange(0, BLOCK_D)
    dmask = dd < D
    idx = tl.load(idx_ptr + offsets(ii, id1, is0, is1, IMODE), mask=imask, other=0).to(tl.int64)
    valid = imask & (idx >= 0) & (idx < V)
    if CHECK:
        tl.store(flag_ptr + ii * 0, tl.full([BLOCK_I], 1, tl.int32), mask=imask & ~valid)
    if W_ROWS:
        w_off = idx[:, None] * (w_s0q * VEC) + dd[None, :]
    else:
        w_off = idx[:, None] * w_s0q + dd[None, :] * w_s1
    rows = tl.load(w_ptr + w_off, mask=valid[:, None] & dmask[None, :], other=0)
    tl.store(out_ptr + ii[:, None] * D + dd[None, :], rows, mask=imask[:, None] & dmask[None, :])


@jit_unspecialized
def _count_kernel(
    idx_ptr, cnt_ptr, n_idx: tl.int64, V: tl.int64, id1: tl.int64, is0: tl.int64,
    is1: tl.int64, BLOCK: tl.constexpr, IMODE: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0).to(tl.int64)
    ii = pid * BLOCK + tl.arange(0, BLOCK)
    imask = ii < n_idx
    idx = tl.load(idx_ptr + offsets(ii, id1, is0, is1, IMODE), mask=imask, other=0).to(tl.int64)
    valid = imask & (idx >= 0) & (idx < V)
    tl.atomic_add(cnt_ptr + idx, tl.full([BLOCK], 1, tl.int32), mask=valid, sem="relaxed")


@jit_unspecialized
def _embedding_bwd_kernel(
    g_ptr, idx_ptr, cnt_ptr, acc_ptr,
    n_idx: tl.int64, V: tl.int64, Dq: tl.int64, padding_idx: tl.int64, n_dblocks: tl.int64,
    id1: tl.int64, is0: tl.int64, is1: tl.int64,
    SCALE: tl.constexpr, COMPUTE: tl.constexpr, VEC: tl.constexpr, BLOCK_I: tl.constexpr,
    BLOCK_D: tl.constexpr, IMODE: tl.constexpr,
):  # fmt: skip
    """The atomic plan: ``[BLOCK_I, BLOCK_D]`` gradient tiles added into ``acc`` rows
    (``Dq``: the row length divided by ``VEC``, so the loads and the relaxed atomics
    are vectorised)."""
    # Like embedding._embedding_kernel's opening, kept apart: kernel code (a @jit helper
    # returning seven values would change the kernel)
    D = Dq * VEC
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
    tl.atomic_add(acc_ptr + idx[:, None] * D + dd[None, :], g, mask=mask, sem="relaxed")


@jit_unspecialized
def _embedding_bwd_owner_kernel(
    g_ptr, idx_ptr, out_ptr,
    n_idx: tl.int64, V: tl.int64, Dq: tl.int64, padding_idx: tl.int64, n_vblocks: tl.int64,
    id1: tl.int64, is0: tl.int64, is1: tl.int64,
    SCALE: tl.constexpr, TO_F32: tl.constexpr, VEC: tl.constexpr, BLOCK_V: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, IMODE: tl.constexpr,
):  # fmt: skip
    """The owner plan: the ``[BLOCK_V, BLOCK_D]`` block of rows ``v0 ...`` and columns
    ``d0 ...`` of the result, summed over every index. Programs of one column block
    are neighbours (row block fastest), so they read the same gradient columns from L2
    at about the same time. ``TO_F32``: the dot in float32 (Triton's interpreter
    multiplies 16-bit arrays in their own precision)."""
    D = Dq * VEC
    pid = tl.program_id(0).to(tl.int64)
    pid_v = pid % n_vblocks
    pid_d = pid // n_vblocks
    v0 = pid_v * BLOCK_V
    rows = tl.arange(0, BLOCK_V)
    dd = pid_d * BLOCK_D + tl.arange(0, BLOCK_D)
    dmask = dd < D
    acc = tl.full([BLOCK_V, BLOCK_D], 0.0, tl.float32)
    cnt = tl.full([BLOCK_V], 0, tl.int32)
    for start in range(0, n_idx, BLOCK_N):
        ii = start + tl.arange(0, BLOCK_N)
        imask = ii < n_idx
        idx = tl.load(idx_ptr + offsets(ii, id1, is0, is1, IMODE), mask=imask, other=-1)
        idx = idx.to(tl.int64)
        mine = imask & (idx >= v0) & (idx < v0 + BLOCK_V) & (idx < V) & (idx != padding_idx)
        r = tl.where(mine, idx - v0, -1).to(tl.int32)
        hit = r[None, :] == rows[:, None]
        g = tl.load(
            g_ptr + ii[:, None] * D + dd[None, :], mask=mine[:, None] & dmask[None, :], other=0.0
        )
        if TO_F32:
            acc = tl.dot(hit.to(tl.float32), g.to(tl.float32), acc, input_precision="ieee")
        else:
            acc = tl.dot(hit.to(g.dtype), g, acc)
        if SCALE:
            cnt += row_sum(hit.to(tl.int32))
    # (x - x) != 0 exactly where x is Inf or NaN
    bad = tl.reduce(tl.reduce(((acc - acc) != 0).to(tl.int32), 1, _MAX_COMBINE), 0, _MAX_COMBINE)
    if bad != 0:
        # a one-hot zero times a non-finite gradient spread NaN over the block: add the
        # rows again without products (rare: only for non-finite gradients)
        acc = tl.full([BLOCK_V, BLOCK_D], 0.0, tl.float32)
        for i in range(0, n_idx):
            # the index as a vector over the columns (the interpreter takes no scalar
            # in a mask)
            idx_i = tl.load(idx_ptr + offsets(i + dd * 0, id1, is0, is1, IMODE)).to(tl.int64)
            take = (idx_i >= v0) & (idx_i < v0 + BLOCK_V) & (idx_i < V) & (idx_i != padding_idx)
            g_i = tl.load(g_ptr + i * D + dd, mask=dmask & take, other=0.0).to(tl.float32)
            hit_i = rows[:, None] == (idx_i - v0)[None, :]
            acc = tl.where(hit_i & take[None, :], acc + g_i[None, :], acc)
    if SCALE:
        acc = acc / tl.maximum(cnt, 1).to(tl.float32)[:, None]
    vv = v0 + rows
    tl.store(
        out_ptr + vv[:, None] * D + dd[None, :],
        acc.to(out_ptr.dtype.element_ty),
        mask=(vv < V)[:, None] & dmask[None, :],
    )


@jit_unspecialized
def _cast_kernel(src_ptr, dst_ptr, nq: tl.int64, VEC: tl.constexpr, BLOCK: tl.constexpr):
    """``dst = src`` converted, over ``nq * VEC`` elements (a known multiple of VEC)."""
    n = nq * VEC
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(src_ptr + offs, mask=mask, other=0.0)
    tl.store(dst_ptr + offs, x.to(dst_ptr.dtype.element_ty), mask=mask)


_embedding = Launcher(_embedding_kernel)
_count = Launcher(_count_kernel)
_embedding_bwd = Launcher(_embedding_bwd_kernel)
_embedding_bwd_owner = Launcher(_embedding_bwd_owner_kernel)
_cast = Launcher(_cast_kernel)


def _block_d(D: int) -> int:
    """The column block for rows of ``D``: of the powers of two from
    ``min(next_pow2(D), MAX_BLOCK_D)`` down to a quarter of it, the one that pads a row
    least (the larger on a tie): 768 -> 256 (3 x 256, not 2 x 512)."""
    first = min(next_pow2(D), MAX_BLOCK_D)
    best = first
    b = first
    while b >= max(1, first // 4):
        if cdiv(D, b) * b < cdiv(D, best) * best:
            best = b
        b //= 2
    return best


def _blocks(n_idx: int, D: int) -> tuple[int, int]:
    """(BLOCK_I, BLOCK_D) for ``n_idx`` rows of ``D`` elements: the tile halves from
    ``TILE`` down to ``MIN_TILE`` while the grid has fewer than ``MIN_PROGRAMS``."""
    block_d = _block_d(D)
    tile = TILE
    while (
        tile > MIN_TILE and cdiv(n_idx, max(1, tile // block_d)) * cdiv(D, block_d) < MIN_PROGRAMS
    ):
        tile //= 2
    return max(1, tile // block_d), block_d


def _owner_blocks(V: int, D: int) -> tuple[int, int]:
    """(BLOCK_V, BLOCK_D) of the owner plan: the column block, then the row block, halve
    down to ``DOT_MIN_BLOCK`` while the grid has fewer than ``DOT_MIN_PROGRAMS``."""
    bv = DOT_BLOCK_V
    bd = max(DOT_MIN_BLOCK, min(DOT_BLOCK_D, next_pow2(D)))
    while cdiv(V, bv) * cdiv(D, bd) < DOT_MIN_PROGRAMS:
        if bd > DOT_MIN_BLOCK:
            bd //= 2
        elif bv > DOT_MIN_BLOCK:
            bv //= 2
        else:
            break
    return bv, bd


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
#: ``benchmarks/reproduce/host_profile.py --python-only``), the strided-index case without its copy.
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
    w_s0, w_s1 = weight.stride()
    w_rows = w_s1 == 1 or D == 1
    vec = vec_of([D, w_s0] if w_rows else [D], [weight])
    block_i, block_d = _blocks(n_idx, D)
    n_dblocks = cdiv(D, block_d)
    grid = (cdiv(n_idx, block_i) * n_dblocks,)
    tail = (n_idx, V, D // vec, w_s0 // vec if w_rows else w_s0, w_s1, n_dblocks, id1, is0, is1)
    consts = dict(
        CHECK=check, VEC=vec, W_ROWS=w_rows, BLOCK_I=block_i, BLOCK_D=block_d, IMODE=imode
    )
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
    if launch is None:
        return torch.zeros(shape, dtype=dtype, device=dev)
    owner, grid, tail, consts, count, cast, copy_g, copy_idx = launch
    g = grad_output.contiguous() if copy_g else grad_output
    idx = indices.contiguous() if copy_idx else indices
    if owner:
        out = torch.empty(shape, dtype=dtype, device=dev)
        _embedding_bwd_owner(grid, (g, idx, out, *tail), **consts)
        return out
    acc = torch.zeros(shape, dtype=acc_dtype, device=dev)
    cnt = idx
    if count is not None:
        cnt = torch.zeros((num_weights,), dtype=torch.int32, device=dev)
        _count(count[0], (idx, cnt, *count[1]), **count[2])
    _embedding_bwd(grid, (g, idx, cnt, acc, *tail), **consts)
    if cast is None:
        return acc
    out = torch.empty(shape, dtype=dtype, device=dev)
    _cast(cast[0], (acc, out, cast[1]), VEC=cast[2], BLOCK=FLAT_BLOCK)
    return out


def _backward_plan(
    grad_output: torch.Tensor, indices: torch.Tensor, num_weights: int, padding_idx: int,
    scale_grad_by_freq: bool,
) -> tuple:  # fmt: skip
    """``((num_weights, D), accumulate dtype, result dtype, launch or None)``; a launch:
    ``(owner plan?, grid, the gradient kernel's integers, its constexprs, the count
    kernel's (grid, integers, constexprs) or None, the cast kernel's (grid, n / VEC, VEC)
    or None, copy the gradient contiguous first, copy the indices contiguous first)``."""
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
    copy_g = not grad_output.is_contiguous()
    scale = bool(scale_grad_by_freq)
    if dtype in (torch.float16, torch.bfloat16) and num_weights * n_idx <= DOT_MAX_PAIRS:
        vec = vec_of([D], [grad_output])
        block_v, block_d = _owner_blocks(num_weights, D)
        n_vblocks = cdiv(num_weights, block_v)
        grid = (n_vblocks * cdiv(D, block_d),)
        tail = (n_idx, num_weights, D // vec, int(padding_idx), n_vblocks, id1, is0, is1)
        consts = dict(
            SCALE=scale, TO_F32=_INTERPRETING, VEC=vec, BLOCK_V=block_v, BLOCK_N=DOT_BLOCK_N,
            BLOCK_D=block_d, IMODE=imode,
        )  # fmt: skip
        launch = (True, grid, tail, consts, None, None, copy_g, copy_idx)
        return shape, acc_dtype, dtype, launch
    count = None
    if scale:
        count = (
            (cdiv(n_idx, FLAT_BLOCK),),
            (n_idx, num_weights, id1, is0, is1),
            dict(BLOCK=FLAT_BLOCK, IMODE=imode),
        )
    vec = vec_of([D], [grad_output])
    block_i, block_d = _blocks(n_idx, D)
    n_dblocks = cdiv(D, block_d)
    grid = (cdiv(n_idx, block_i) * n_dblocks,)
    tail = (n_idx, num_weights, D // vec, int(padding_idx), n_dblocks, id1, is0, is1)
    consts = dict(
        SCALE=scale, COMPUTE=compute, VEC=vec, BLOCK_I=block_i, BLOCK_D=block_d, IMODE=imode
    )
    n = num_weights * D
    cast = None
    if acc_dtype != dtype:
        cvec = vec_of([n], [grad_output])
        cast = ((cdiv(n, FLAT_BLOCK),), n // cvec, cvec)
    launch = (False, grid, tail, consts, count, cast, copy_g, copy_idx)
    return shape, acc_dtype, dtype, launch


# the gate repeats these functions' launches (native_launch.declare_replay)
declare_replay(embedding, embedding_dense_backward)
