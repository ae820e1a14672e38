"""The device side of :mod:`opbench.kernels._lib.reduction`: its one 2-D kernel
(:func:`_reduce_kernel`, launched through ``_reduce``), the ``@triton.jit`` helpers it is
built from, and the encoding of a strided side that the kernel reads: :func:`merge_side`
and :func:`side_args` give :func:`offsets`' ``(MODE, d1, s0, s1)``; :func:`vec_of`,
:func:`used_values` and :func:`divided` pass sizes and strides divided by the vector
width, which the kernel multiplies back. softmax, softmax_long and embedding build on
the same helpers (imported through :mod:`reduction`, which re-exports them). The plan
(tiles, splits, grid), its tuning constants and caches and the ATen entry points are in
:mod:`reduction`: nothing here reads them, so a value set there reaches every launch.

* Each program owns ``BLOCK_M`` rows and loops over the columns in ``BLOCK_N`` chunks,
  accumulating a ``[BLOCK_M, BLOCK_N]`` tile (float32 for f16/bf16/f32, float64 for
  f64, int64 for integers and bools, as eager's accumulate types), then reduces it once.
  Chunks inside the row load without a column mask and the contiguous side's length
  arrives as a multiple of the vector where it is one, so every load of a contiguous run
  is a 16-byte vector: a runtime length without that proof made every mask per-element
  and every f16 load 2 bytes (a 256 MiB f16 sum read at 0.61 of copy bandwidth, eager
  0.86; ``benchmarks/results/sum-sweep-h100.md``).
* A split launch: program ``(m, s)`` reduces the ``s``-th slice of its rows into a
  partial, and the last program of each row block to finish (an atomic counter) sums
  the partials in split order and writes the result: deterministic, no second launch
  (1.6-3.1 us of device time each on the traced cases) and no memset (each launch
  leaves the counters at zero).

``amax`` propagates NaN (a NaN anywhere in a row gives NaN, as eager); ``mean`` divides
the float sum by the reduced count in the kernel (0/0 gives eager's NaN for an empty
reduction). Only triton.language builtins inside the kernels (``tl.reduce`` with the
standard library's combine functions, not ``tl.sum``/``tl.max``/``tl.zeros``): see
:data:`_SUM_COMBINE`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import triton
import triton.language as tl

from opbench.kernels._lib.launch import Launcher, jit_unspecialized

__all__ = [
    "offsets",
    "row_sum",
    "row_max",
    "max_nan",
    "tl_dtype",
    "merge_side",
    "side_args",
    "vec_of",
    "used_values",
    "divided",
]

_TL = {
    torch.float16: tl.float16, torch.bfloat16: tl.bfloat16, torch.float32: tl.float32,
    torch.float64: tl.float64, torch.int8: tl.int8, torch.int16: tl.int16,
    torch.int32: tl.int32, torch.int64: tl.int64, torch.uint8: tl.uint8, torch.bool: tl.int1,
}  # fmt: skip


def tl_dtype(dtype: torch.dtype) -> Any:
    t = _TL.get(dtype)
    if t is None:
        raise NotImplementedError(f"no Triton kernel for {dtype}")
    return t


# ----------------------------------------------------------------------------- kernel


@triton.jit
def offsets(idx, d1, s0, s1, MODE: tl.constexpr):
    """Element offsets of flat indices ``idx`` over one side's merged dims. MODE 0: one
    dim of stride 1; 1: one dim of stride ``s0``; 2: two dims (inner size ``d1``);
    3: two dims, the inner one of stride 1 (NCHW's channel sums: contiguous runs of
    ``d1``, vectorised when ``d1`` is a known multiple of VEC)."""
    if MODE == 0:
        off = idx
    elif MODE == 1:
        off = idx * s0
    elif MODE == 2:
        off = (idx // d1) * s0 + (idx % d1) * s1
    else:
        off = (idx // d1) * s0 + idx % d1
    return off


#: The standard library's own combine functions. The interpreter recognises them and
#: reduces a tile with numpy (``np.sum``, pairwise, as accurate as eager's cascade sum;
#: ``np.nanmax``); any other combine function it calls once per element, in Python.
#: ``tl.sum``/``tl.max``/``tl.zeros`` themselves are ``@jit`` functions of
#: triton.language.standard: in a process that imported triton before choosing the
#: interpreter (opbench's CPU workers) they stay compiled-only and raise inside an
#: interpreted kernel, so the kernels call ``tl.reduce`` with these directly.
_SUM_COMBINE = tl.standard._sum_combine
_MAX_COMBINE = tl.standard._elementwise_max


@triton.jit
def row_sum(x):
    """Sum over axis 1 of a 2-D tile."""
    return tl.reduce(x, 1, _SUM_COMBINE)


@triton.jit
def row_max(x):
    """Max over axis 1 of a 2-D tile, NaN if any element is NaN (``maximum`` ignores
    NaN: the NaNs are summed in, 0 where there are none)."""
    return tl.reduce(x, 1, _MAX_COMBINE) + tl.reduce(tl.where(x != x, x, 0), 1, _SUM_COMBINE)


@triton.jit
def max_nan(a, b):
    """Elementwise max that propagates NaN."""
    return tl.where((a > b) | (a != a), a, b)


@triton.jit
def _chunk(x_ptr, m_off, mask_m, c, nd1, ns0, ns1, MODE_N: tl.constexpr,
           BLOCK_N: tl.constexpr, EVICT: tl.constexpr):  # fmt: skip
    """Column chunk ``c`` (a full one: no column mask) of the rows at ``m_off``."""
    n = c * BLOCK_N + tl.arange(0, BLOCK_N)
    ptrs = x_ptr + (m_off[:, None] + offsets(n, nd1, ns0, ns1, MODE_N)[None, :])
    return tl.load(ptrs, mask=mask_m[:, None], other=0, eviction_policy=EVICT)


@triton.jit
def _fold(acc, v, OP: tl.constexpr, CAST: tl.constexpr, ACC: tl.constexpr):
    """``acc`` with a full chunk ``v`` summed or max-ed in (rows past M hold junk, never
    stored)."""
    if CAST is not None:
        v = v.to(CAST)
    v = v.to(ACC)
    if OP == 0:
        acc += v
    else:
        acc = max_nan(acc, v)
    return acc


@triton.jit
def _masked_fold(acc, fill, x_ptr, m_off, mask_m, c, N, nd1, ns0, ns1, MODE_N: tl.constexpr,
                 BLOCK_N: tl.constexpr, OP: tl.constexpr, CAST: tl.constexpr,
                 ACC: tl.constexpr):  # fmt: skip
    """``acc`` with chunk ``c`` folded in, its columns past ``N`` masked (a row's last
    chunk, or a program's only one)."""
    n = c * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = mask_m[:, None] & (n < N)[None, :]
    ptrs = x_ptr + (m_off[:, None] + offsets(n, nd1, ns0, ns1, MODE_N)[None, :])
    v = tl.load(ptrs, mask=mask, other=0)
    if CAST is not None:
        v = v.to(CAST)
    v = v.to(ACC)
    if OP != 0:
        v = tl.where(mask, v, fill)  # masked-off lanes must not win a max
    return _fold(acc, v, OP, None, ACC)


@triton.jit
def _fold_partials(pacc, pfill, part_ptr, s0, splits, M, m, mask_m, OP: tl.constexpr,
                   SPLIT_BLOCK: tl.constexpr):  # fmt: skip
    """``pacc`` with splits ``s0 ... s0 + SPLIT_BLOCK`` of the partials folded in."""
    s = s0 + tl.arange(0, SPLIT_BLOCK)
    pmask = mask_m[:, None] & (s < splits)[None, :]
    # .cg: from L2, never a line an earlier launch left in this SM's L1
    p = tl.load(part_ptr + (s[None, :] * M + m[:, None]), mask=pmask, other=0,
                cache_modifier=".cg")  # fmt: skip
    if OP == 0:
        pacc += p
    else:
        pacc = max_nan(pacc, tl.where(pmask, p, pfill))
    return pacc


@jit_unspecialized
def _reduce_kernel(
    x_ptr, out_ptr, part_ptr, cnt_ptr,
    M: tl.int64, N: tl.int64, per_split: tl.int64,
    md1: tl.int64, ms0: tl.int64, ms1: tl.int64,
    nd1: tl.int64, ns0: tl.int64, ns1: tl.int64,
    init: tl.float64, denom: tl.float64,
    OP: tl.constexpr, MEAN: tl.constexpr, CAST: tl.constexpr, ACC: tl.constexpr,
    MODE_M: tl.constexpr, MODE_N: tl.constexpr, VEC: tl.constexpr, MVEC: tl.constexpr,
    NVEC: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, IDX: tl.constexpr,
    SPLIT_BLOCK: tl.constexpr, STAGES: tl.constexpr, PINGPONG: tl.constexpr,
    EVICT: tl.constexpr, ONE_CHUNK: tl.constexpr, COMBINE_ITERS: tl.constexpr,
):  # fmt: skip
    """Program ``(m, s)`` reduces columns ``[s * per_split, (s + 1) * per_split)`` (in
    chunks of BLOCK_N) of rows ``m * BLOCK_M ...``. Strides arrive divided by VEC, ``M``
    by MVEC and ``N`` by NVEC (see :func:`vec_of`) and are multiplied back here, so the
    compiler knows them multiples and can prove a row start 16-byte aligned and a mask
    constant over a vector. The chunks that lie inside ``N`` load without a column mask;
    only the row's last chunk is masked. ``IDX`` is the index type: int32 whenever every
    offset fits (:func:`opbench.kernels._lib.pointwise.index_type`). ``STAGES``,
    ``PINGPONG`` and ``EVICT``: how the full chunks are loaded (:data:`STAGES`).

    ``SPLIT_BLOCK == 0``: one program a row block (grid axis 1 is 1), the result goes
    straight to ``out``. Otherwise each program stores its partial (accumulate type) at
    ``part[s * M + m]`` and counts itself in ``cnt[m-block]``; the program that counts
    last sums the row block's partials in split order, ``SPLIT_BLOCK`` at a time (the
    same order every call: deterministic), writes ``out`` and sets the counter back to 0
    for the next launch. One launch, no second stage, no memset.

    ``ONE_CHUNK``: every program reads exactly one chunk (``per_split == 1``), loaded
    straight-line with its column mask. ``COMBINE_ITERS`` > 0: the partials lie in that
    many SPLIT_BLOCK tiles, read unrolled (0: a loop). Either reads what the loop would,
    in the same order: the same bits."""
    pid_m = tl.program_id(0).to(IDX)
    pid_s = tl.program_id(1).to(IDX)
    # multiplied back (softmax_kernels' kernels do the same for their own arguments)
    M = M.to(IDX) * MVEC
    N = N.to(IDX) * NVEC
    per_split = per_split.to(IDX)
    md1 = md1.to(IDX) * VEC
    ms0 = ms0.to(IDX) * VEC
    ms1 = ms1.to(IDX) * VEC
    nd1 = nd1.to(IDX) * VEC
    ns0 = ns0.to(IDX) * VEC
    ns1 = ns1.to(IDX) * VEC
    m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    mask_m = m < M
    m_off = offsets(m, md1, ms0, ms1, MODE_M)
    first = pid_s * per_split
    last = tl.minimum(first + per_split, (N + (BLOCK_N - 1)) // BLOCK_N)
    inside = tl.minimum(last, N // BLOCK_N)  # chunks before this one are full
    fill = tl.full([BLOCK_M, BLOCK_N], 0, ACC) + tl.cast(init, ACC)
    acc = fill
    if ONE_CHUNK:
        # straight-line: ptxas issues all of a thread's loads before the first add (in a
        # loop it waits on each 16-byte load before issuing the next; sm_90 SASS)
        acc = _masked_fold(acc, fill, x_ptr, m_off, mask_m, first, N, nd1, ns0, ns1, MODE_N,
                           BLOCK_N, OP, CAST, ACC)  # fmt: skip
    elif PINGPONG:
        if first < inside:
            va = _chunk(x_ptr, m_off, mask_m, first, nd1, ns0, ns1, MODE_N, BLOCK_N, EVICT)
            for c in range(first + 1, inside - 1, 2):
                vb = _chunk(x_ptr, m_off, mask_m, c, nd1, ns0, ns1, MODE_N, BLOCK_N, EVICT)
                acc = _fold(acc, va, OP, CAST, ACC)
                va = _chunk(x_ptr, m_off, mask_m, c + 1, nd1, ns0, ns1, MODE_N, BLOCK_N, EVICT)
                acc = _fold(acc, vb, OP, CAST, ACC)
            if (inside - first) % 2 == 0:  # an even count: one chunk left to load
                vb = _chunk(x_ptr, m_off, mask_m, inside - 1, nd1, ns0, ns1, MODE_N, BLOCK_N,
                            EVICT)  # fmt: skip
                acc = _fold(acc, va, OP, CAST, ACC)
                va = vb
            acc = _fold(acc, va, OP, CAST, ACC)
    else:
        for c in tl.range(first, inside, num_stages=STAGES):
            v = _chunk(x_ptr, m_off, mask_m, c, nd1, ns0, ns1, MODE_N, BLOCK_N, EVICT)
            acc = _fold(acc, v, OP, CAST, ACC)
    if not ONE_CHUNK:
        for c in range(tl.maximum(first, inside), last):
            acc = _masked_fold(acc, fill, x_ptr, m_off, mask_m, c, N, nd1, ns0, ns1, MODE_N,
                               BLOCK_N, OP, CAST, ACC)  # fmt: skip
    if OP == 0:
        res = row_sum(acc)
    else:
        res = row_max(acc)
    if SPLIT_BLOCK == 0:
        if MEAN:
            res = res / tl.cast(denom, ACC)
        tl.store(out_ptr + m, res.to(out_ptr.dtype.element_ty), mask=mask_m)
    else:
        splits = tl.num_programs(1).to(IDX)
        tl.store(part_ptr + (pid_s * M + m), res, mask=mask_m)
        # every thread's partial is written before one thread's release (CUTLASS's
        # semaphore: barrier, then a gpu-scope release by one thread)
        tl.debug_barrier()
        arrived = tl.atomic_add(cnt_ptr + pid_m, 1, sem="acq_rel")
        if arrived == splits - 1:
            pfill = tl.full([BLOCK_M, SPLIT_BLOCK], 0, ACC) + tl.cast(init, ACC)
            pacc = pfill
            if COMBINE_ITERS > 0:  # unrolled: every tile's loads in flight at once
                for i in tl.static_range(COMBINE_ITERS):
                    pacc = _fold_partials(pacc, pfill, part_ptr, i * SPLIT_BLOCK, splits, M, m,
                                          mask_m, OP, SPLIT_BLOCK)  # fmt: skip
            else:
                for s0 in range(0, splits, SPLIT_BLOCK):
                    pacc = _fold_partials(pacc, pfill, part_ptr, s0, splits, M, m, mask_m, OP,
                                          SPLIT_BLOCK)  # fmt: skip
            if OP == 0:
                res = row_sum(pacc)
            else:
                res = row_max(pacc)
            if MEAN:
                res = res / tl.cast(denom, ACC)
            tl.store(out_ptr + m, res.to(out_ptr.dtype.element_ty), mask=mask_m)
            tl.store(cnt_ptr + pid_m, 0)


_reduce = Launcher(_reduce_kernel)


# ----------------------------------------------------------------------------- the kernel's arguments


def merge_side(sizes: Sequence[int], strides: Sequence[int]) -> tuple[list[int], list[int]]:
    """Drop size-1 dims and merge neighbours where ``stride[i] == stride[i+1]*size[i+1]``."""
    out_sizes: list[int] = []
    out_strides: list[int] = []
    for s, st in zip(sizes, strides):
        if s == 1:
            continue
        if out_sizes and out_strides[-1] == st * s:
            out_sizes[-1] *= s
            out_strides[-1] = st
        else:
            out_sizes.append(s)
            out_strides.append(st)
    return out_sizes, out_strides


def side_args(sizes: list[int], strides: list[int]) -> tuple[int, int, int, int] | None:
    """``(MODE, d1, s0, s1)`` for :func:`offsets`, None for more than two dims."""
    if not sizes:
        return 1, 1, 0, 0
    if len(sizes) == 1:
        return (0 if strides[0] == 1 else 1), 1, strides[0], 0
    if len(sizes) == 2:
        return (3 if strides[1] == 1 else 2), sizes[1], strides[0], strides[1]
    return None


def vec_of(values: Sequence[int], tensors: Sequence[torch.Tensor]) -> int:
    """The largest of 8, 4, 2 (at most 16 bytes of the narrowest dtype) dividing every
    size and stride in ``values`` (those the kernel multiplies by), else 1. Integer
    arguments are not specialised (one compile for all shapes), so without this the
    compiler cannot prove a row start 16-byte aligned and loads one element at a time:
    a row sum of a 4096x4096 f16 tensor took 47 us on the H100, eager 24."""
    cap = 16 // min(t.element_size() for t in tensors)
    for v in (8, 4, 2):
        if v <= cap and all(u % v == 0 for u in values):
            return v
    return 1


def used_values(args: tuple[int, int, int, int]) -> list[int]:
    """The sizes and strides :func:`offsets` multiplies by for ``(MODE, d1, s0, s1)``."""
    mode, d1, s0, s1 = args
    return [] if mode == 0 else [s0] if mode == 1 else [d1, s0, s1] if mode == 2 else [d1, s0]


def divided(args: tuple[int, int, int, int], vec: int) -> tuple[int, int, int]:
    """``(d1, s0, s1)`` divided by ``vec`` (unused entries become 0)."""
    mode, d1, s0, s1 = args
    if mode == 0:
        return 0, 0, 0
    if mode == 1:
        return 0, s0 // vec, 0
    if mode == 3:
        return d1 // vec, s0 // vec, 0
    return d1 // vec, s0 // vec, s1 // vec
