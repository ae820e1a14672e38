"""Reductions (``sum``, ``mean``, ``amax``) over any set of dimensions of a strided
input: one 2-D kernel, rows = kept elements, columns = reduced elements, and the ATen
entry points that follow the schemas.

How a call is launched (:func:`reduce_into`):

* The kept dims (in the output's row-major order) and the reduced dims (sorted by
  stride, so a transposed input still merges) are each merged where contiguous and
  addressed by at most two dims per side: row ``m`` and column ``n`` become
  ``offset(m) + offset(n)``, loaded straight from the input (no copy). A side that
  merges to one dim of stride 1 is a constexpr mode (``MODE_* == 0``), so the compiler
  sees the contiguity and vectorises. More than two dims on a side (rare) copies the
  input once, permuted so the kept dims lead (`.contiguous()`), which merges to one each.
* Each program owns ``BLOCK_M`` rows and loops over the columns in ``BLOCK_N`` chunks,
  accumulating a ``[BLOCK_M, BLOCK_N]`` tile (float32 for f16/bf16/f32, float64 for
  f64, int64 for integers and bools, as eager's accumulate types), then reduces it once.
  Tiles are row-shaped (wide ``BLOCK_N``) when the reduced side is the contiguous one and
  column-shaped (wide ``BLOCK_M``) when the kept side is, so loads coalesce either way.
* Two stages when the rows alone cannot fill the GPU (a whole-tensor ``sum``, a
  reduction over a long dim of a few rows): program ``(m, s)`` reduces the ``s``-th slice
  of row ``m`` into a ``[M, S]`` partial buffer of the accumulate type, and a second
  launch of the same kernel reduces those ``S`` columns into the output.

``amax`` propagates NaN (a NaN anywhere in a row gives NaN, as eager); ``mean`` divides
the float sum by the reduced count in the kernel (0/0 gives eager's NaN for an empty
reduction).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

import torch
import triton
import triton.language as tl

from opbench.kernels._lib.launch import Launcher, cdiv, next_pow2, remember
from opbench.kernels._lib.pointwise import destination, dtype_name, index_type

__all__ = [
    "reduce_into",
    "normalize_dims",
    "merge_side",
    "offsets",
    "row_sum",
    "row_max",
    "max_nan",
    "tl_dtype",
    "vec_of",
    "used_values",
    "divided",
    "sum_default",
    "sum_dim",
    "sum_dim_out",
    "sum_out",
    "mean_default",
    "mean_dim",
    "mean_out",
    "mean_dtype_out",
    "amax",
    "amax_out",
]

_INTERPRETING = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")

#: Programs that fill an H100 (132 SMs x 16 resident 4-warp programs); fewer row programs
#: than this split the columns into a second stage. The loop does not pipeline its loads,
#: so programs in flight are the memory parallelism: a 16M-element f16 sum took 42.6 us
#: with 528 programs of 8 chunks (eager 24.5).
TARGET_PROGRAMS = 4 if _INTERPRETING else 2112
#: A split reads at least this many column chunks, and a split launch has at least
#: MIN_SPLITS splits: sum over dim 1 of 32x128x768 f16 split in two took 23.2 us against
#: 10.1 unsplit (eager 11.9). H100 timings varied up to 1.7x between machines: re-measure.
MIN_CHUNKS_PER_SPLIT = 1 if _INTERPRETING else 2
MIN_SPLITS = 2 if _INTERPRETING else 4
#: A row of at most this many column chunks is reduced in one launch even when the rows
#: alone do not fill the GPU (1: off, the two-stage plan). 16 was tried: the second
#: stage's launch and partial buffer cost host time (whole-tensor sum of 35,200 f16
#: elements in two launches 62.4 us host-inclusive, eager 15.8), but on the H100 the
#: serial chunks cost more device time than that saved: over the traced cases
#: (``opbench run --suite traces --ops sum,... --limit-per-op 4``, 2026-11-25)
#: sum.dim_IntList went 0.92 -> 0.455x eager in device time (host 0.40 -> 0.82) and
#: sum.default 0.815 -> 0.743. Off until a plan wins both.
SINGLE_CHUNKS = 1
#: Row-shaped tiles (reduced side contiguous), by the reduced length: (limit, BM, BN).
#: Every tile holds 4,096 elements (32 per thread at 4 warps).
ROW_TILES = ((16, 256, 16), (128, 32, 128), (512, 8, 512), (1024, 4, 1024), (2048, 2, 2048),
             (None, 1, 4096))  # fmt: skip
#: Column-shaped tile (kept side contiguous): 128 contiguous rows x 32 reduced columns.
COL_TILE = (128, 32)
#: The narrow column tile (32 contiguous rows x 128 reduced columns) when it keeps a
#: split-free launch that the wide one would split: a sum over dim 0 of 2048x768 f16
#: is 24 programs of 16 chunks instead of 6 programs split 32 ways plus a second launch.
NARROW_COL_TILE = (32, 128)
#: Tile elements under the interpreter: big tiles, few programs (it runs them one by one).
_INTERP_TILE = 16384

SUM, MAX = 0, 1

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


def acc_dtype(dtype: torch.dtype) -> torch.dtype:
    """Eager's accumulate type for a result of ``dtype``."""
    if dtype == torch.float64:
        return torch.float64
    if dtype.is_floating_point:
        if dtype not in (torch.float16, torch.bfloat16, torch.float32):
            raise NotImplementedError(f"no Triton kernel for {dtype}")
        return torch.float32
    if dtype.is_complex:
        raise NotImplementedError(f"no Triton kernel for {dtype}")
    return torch.int64


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


@triton.jit(do_not_specialize=["M", "N", "per_split", "md1", "ms0", "ms1", "nd1", "ns0", "ns1"])
def _reduce_kernel(
    x_ptr, out_ptr,
    M: tl.int64, N: tl.int64, per_split: tl.int64,
    md1: tl.int64, ms0: tl.int64, ms1: tl.int64,
    nd1: tl.int64, ns0: tl.int64, ns1: tl.int64,
    init: tl.float64, denom: tl.float64,
    OP: tl.constexpr, MEAN: tl.constexpr, CAST: tl.constexpr, ACC: tl.constexpr,
    MODE_M: tl.constexpr, MODE_N: tl.constexpr, VEC: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, IDX: tl.constexpr,
):  # fmt: skip
    """``per_split`` is in chunks of BLOCK_N; sizes and strides arrive divided by VEC
    (see :func:`vec_of`) and are multiplied back here, so the compiler knows they are
    multiples of VEC and can vectorise the loads. ``IDX`` is the index type: int32
    whenever every offset fits (:func:`opbench.kernels._lib.pointwise.index_type`)."""
    pid_m = tl.program_id(0).to(IDX)
    pid_s = tl.program_id(1).to(IDX)
    splits = tl.num_programs(1).to(IDX)
    M = M.to(IDX)
    N = N.to(IDX)
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
    start = pid_s * per_split * BLOCK_N
    fill = tl.full([BLOCK_M, BLOCK_N], 0, ACC) + tl.cast(init, ACC)
    acc = fill
    for k in range(0, per_split):
        n = start + k * BLOCK_N + tl.arange(0, BLOCK_N)
        mask = mask_m[:, None] & (n < N)[None, :]
        ptrs = x_ptr + (m_off[:, None] + offsets(n, nd1, ns0, ns1, MODE_N)[None, :])
        v = tl.load(ptrs, mask=mask, other=0)
        if CAST is not None:
            v = v.to(CAST)
        v = v.to(ACC)
        if OP == 0:
            acc += v
        else:
            acc = max_nan(acc, tl.where(mask, v, fill))
    if OP == 0:
        res = row_sum(acc)
    else:
        res = row_max(acc)
    if MEAN:
        res = res / tl.cast(denom, ACC)
    tl.store(out_ptr + (m * splits + pid_s), res.to(out_ptr.dtype.element_ty), mask=mask_m)


_reduce = Launcher(_reduce_kernel)


# ----------------------------------------------------------------------------- launching


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


def _tile(M: int, N: int, m_args: tuple, n_args: tuple) -> tuple[int, int]:
    if _INTERPRETING:
        bn = min(next_pow2(max(N, 1)), _INTERP_TILE)
        bm = min(next_pow2(max(M, 1)), max(1, _INTERP_TILE // bn))
        return bm, bn
    if m_args[0] in (0, 3) and n_args[0] not in (0, 3):
        bm, bn = COL_TILE
        nbm, nbn = NARROW_COL_TILE
        if (
            SINGLE_CHUNKS > 1  # the narrow tile serves the one-launch option only
            and cdiv(M, bm) < TARGET_PROGRAMS
            and cdiv(N, bn) > SINGLE_CHUNKS
            and cdiv(N, nbn) <= SINGLE_CHUNKS
        ):
            return NARROW_COL_TILE
        return COL_TILE
    for limit, bm, bn in ROW_TILES:
        if limit is None or N <= limit:
            return bm, bn
    raise AssertionError


def _stages(
    shape: Sequence[int], stride: Sequence[int], elem: int, M: int, N: int,
    m_args: tuple, n_args: tuple, acc: torch.dtype,
) -> list[tuple[tuple[int, int], tuple[int, ...], dict[str, Any]]]:  # fmt: skip
    """The launches that reduce an input of ``shape``/``stride`` (``elem`` bytes an
    element; rows ``m_args``, columns ``n_args``) to M values: one, or two and more
    through ``[M, splits]`` partial buffers when the rows alone do not fill the GPU.
    Each: grid, the kernel's integers, and the constexprs that depend on the shape."""
    bm, bn = _tile(M, N, m_args, n_args)
    cap = 16 // elem
    used = used_values(m_args) + used_values(n_args)
    vec = next((v for v in (8, 4, 2) if v <= cap and all(u % v == 0 for u in used)), 1)
    mode_m, (md1, ms0, ms1) = m_args[0], divided(m_args, vec)
    mode_n, (nd1, ns0, ns1) = n_args[0], divided(n_args, vec)
    programs = cdiv(M, bm)
    chunks = cdiv(N, bn)
    splits = 1
    if programs < TARGET_PROGRAMS and chunks > SINGLE_CHUNKS and chunks >= 2 * MIN_CHUNKS_PER_SPLIT:
        splits = min(cdiv(TARGET_PROGRAMS, programs), chunks // MIN_CHUNKS_PER_SPLIT)
    if splits < MIN_SPLITS:
        splits = 1
    per_split = max(1, cdiv(chunks, splits))  # in chunks
    splits = max(1, cdiv(N, per_split * bn))
    # the indices (rows, columns, partial-buffer slots) and x's offsets: its extent
    idx = index_type(max(M * splits, M + bm, N + per_split * bn), shape, [stride])
    first = (
        (programs, splits),
        (M, N, per_split, md1, ms0, ms1, nd1, ns0, ns1),
        dict(MODE_M=mode_m, MODE_N=mode_n, VEC=vec, BLOCK_M=bm, BLOCK_N=bn, IDX=idx),
    )
    if splits == 1:
        return [first]
    rest = _stages(
        (M, splits), (splits, 1), acc.itemsize, M, splits, (1, 1, splits, 0), (0, 1, 1, 0), acc
    )
    return [first, *rest]


def _launch(x: torch.Tensor, out: torch.Tensor, launches: tuple) -> None:
    """Run :func:`_reduce_plan`'s launches: ``x`` into partial buffers of the accumulate
    type, the last into ``out``."""
    src = x
    for grid, tail, consts, scratch in launches:
        if scratch is None:
            dst = out
        else:
            dst = torch.empty_strided(scratch[0], scratch[1], dtype=scratch[2], device=x.device)
        _reduce(grid, (src, dst, *tail), **consts)
        src = dst


def normalize_dims(x: torch.Tensor, dim: Any, name: str = "") -> list[int]:
    """ATen's dim list: None or [] is every dim; wrapped, range-checked, no repeats."""
    nd = x.dim()
    if dim is None:
        return list(range(nd))
    if isinstance(dim, int):
        dim = [dim]
    dims = [int(d) for d in dim]
    if not dims:
        return list(range(nd))
    bound = max(nd, 1)
    out: list[int] = []
    for d in dims:
        if not -bound <= d < bound:
            raise IndexError(
                f"Dimension out of range (expected to be in range of [{-bound}, {bound - 1}], "
                f"but got {d})"
            )
        w = d % bound
        if w in out:
            raise RuntimeError(f"dim {w} appears multiple times in the list of dims")
        out.append(w)
    return [d for d in out if d < nd]


def reduced_shape(x: torch.Tensor, dims: list[int], keepdim: bool) -> tuple[int, ...]:
    if keepdim:
        return tuple(1 if i in dims else s for i, s in enumerate(x.shape))
    return tuple(s for i, s in enumerate(x.shape) if i not in dims)


def reduce_into(
    x: torch.Tensor,
    dims: list[int],
    dest: torch.Tensor,
    op: int,
    *,
    mean: bool = False,
    cast: torch.dtype | None = None,
) -> torch.Tensor:
    """Reduce ``x`` over ``dims`` into ``dest`` (the kept elements in row-major order,
    any shape/strides); ``cast`` converts each element first (``sum(dtype=)``)."""
    _reduce_into(x, dims, dest, op, mean, cast)
    return dest


def _reduce_into(
    x: torch.Tensor, dims: list[int], dest: torch.Tensor, op: int, mean: bool,
    cast: torch.dtype | None,
) -> Any:  # fmt: skip
    """:func:`reduce_into`, returning the plan it launched."""
    key = (x.shape, x.stride(), x.dtype, tuple(dims), dest.dtype, op, mean, cast)
    plan = _PLANS.get(key)
    if plan is None:
        plan = _reduce_plan(x, dims, dest.dtype, op, mean, cast)
        remember(_PLANS, key, plan)
    if plan is _NOTHING:
        return plan
    permute, launches = plan
    if permute is not None:
        x = x.permute(*permute).contiguous()
    target = dest
    if not dest.is_contiguous():
        target = torch.empty(dest.shape, dtype=dest.dtype, device=dest.device)
    _launch(x, target, launches)
    if target is not dest:
        dest.copy_(target)
    return plan


#: Two kinds of entries, both cleared together (``benchmarks/launch_profile.py`` clears
#: it after changing the tiles):
#:
#: * (input layout and dtype, dims, result dtype, op, mean, cast) -> :func:`_reduce_plan`'s
#:   plan: the planning (merged sides, tiles, splits, index type) cost more host time
#:   than the launches, and models reduce the same layouts over and over;
#: * (entry point, input layout and dtype, its arguments as given) -> :func:`_call`'s
#:   ``(output shape, strides, dtype, launches)``: a repeat call of ``sum``/``mean``/
#:   ``amax`` without ``out=`` checks nothing again (the same arguments passed the checks
#:   before) and only allocates and launches: 6.5-13.4 -> 2.8-5.3 us of Python a call on
#:   the 15 traced sum/mean cases (launches stubbed, CPU; ``benchmarks/host_profile.py
#:   --python-only --ops sum,mean``).
_PLANS: dict[tuple, Any] = {}
_NOTHING = object()  # no kept element: nothing to launch


def _reduce_plan(
    x: torch.Tensor, dims: list[int], dest_dtype: torch.dtype, op: int, mean: bool,
    cast: torch.dtype | None,
) -> Any:  # fmt: skip
    """``(permutation or None, launches)``, or :data:`_NOTHING`. Each launch:
    ``(grid, the kernel's arguments after the two pointers, every constexpr, None for the
    last (it writes the result) else the partial buffer's (shape, strides, dtype))``."""
    nd = x.dim()
    kept = [d for d in range(nd) if d not in dims]
    M = math.prod(x.shape[d] for d in kept)
    N = math.prod(x.shape[d] for d in dims)
    if M == 0:
        return _NOTHING
    acc = acc_dtype(dest_dtype if cast is None else cast)
    cast_tl = tl_dtype(cast) if cast is not None and cast != x.dtype else None
    init = 0.0 if op == SUM else (-math.inf if acc.is_floating_point else float(-(2**63)))
    m_args = side_args(*merge_side([x.shape[d] for d in kept], [x.stride(d) for d in kept]))
    red = sorted(dims, key=lambda d: -x.stride(d))
    n_args = side_args(*merge_side([x.shape[d] for d in red], [x.stride(d) for d in red]))
    permute = None
    shape, stride = list(x.shape), list(x.stride())
    if m_args is None or n_args is None:
        # more than two dims on a side: one permuted copy, which merges to one each
        permute = (*kept, *red)
        m_args, n_args = (1, 1, N, 0), (0, 1, 1, 0)
        shape = [x.shape[d] for d in permute]
        stride = [math.prod(shape[i + 1 :]) for i in range(len(shape))]
    denom = float(N) if N else math.nan
    stages = _stages(shape, stride, x.element_size(), M, N, m_args, n_args, acc)
    acc_tl = tl_dtype(acc)
    last = len(stages) - 1
    launches = []
    for i, (grid, ints, consts) in enumerate(stages):
        scratch = None if i == last else ((ints[0], grid[1]), (grid[1], 1), acc)
        launches.append((
            tuple(grid), (*ints, init, denom),
            dict(OP=op, MEAN=mean and i == last, CAST=cast_tl if i == 0 else None, ACC=acc_tl,
                 **consts),
            scratch,
        ))  # fmt: skip
    return permute, tuple(launches)


def _call(key: tuple, x: torch.Tensor) -> torch.Tensor | None:
    """A repeat call's result (allocated and launched), or None on a first call."""
    call = _PLANS.get(key)
    if call is None:
        return None
    shape, stride, dtype, launches = call
    out = torch.empty_strided(shape, stride, dtype=dtype, device=x.device)
    if len(launches) == 1:
        grid, tail, consts, _ = launches[0]
        _reduce(grid, (x, out, *tail), **consts)
    else:
        _launch(x, out, launches)
    return out


def _first(key: tuple, x: torch.Tensor, dims: list[int], dest: torch.Tensor, op: int,
           mean: bool, cast: torch.dtype | None) -> torch.Tensor:  # fmt: skip
    """A first call's reduction into ``dest`` (allocated without ``out=``); remembers
    what a repeat call needs when ``x`` reads in place and ``dest`` is contiguous."""
    plan = _reduce_into(x, dims, dest, op, mean, cast)
    if plan is _NOTHING:
        remember(_PLANS, key, (tuple(dest.shape), dest.stride(), dest.dtype, ()))
    elif plan[0] is None and dest.is_contiguous():
        remember(_PLANS, key, (tuple(dest.shape), dest.stride(), dest.dtype, plan[1]))
    return dest


def _dims_key(dim: Any) -> Any:
    return tuple(dim) if dim.__class__ is list else dim


# ----------------------------------------------------------------------------- ATen ops


def _sum(self, dim, keepdim, dtype, out, key=None) -> torch.Tensor:
    dims = normalize_dims(self, dim)
    if dtype is None:
        if out is not None:
            dtype = out.dtype
        elif self.dtype.is_floating_point or self.dtype.is_complex:
            dtype = self.dtype
        else:
            dtype = torch.int64
    if out is not None and out.dtype != dtype:
        raise RuntimeError(
            f"Expected out tensor to have dtype {dtype}, but got {out.dtype} instead"
        )
    acc_dtype(dtype)
    acc_dtype(self.dtype)
    dest = destination(reduced_shape(self, dims, keepdim), dtype, [self], out=out)
    cast = dtype if dtype != self.dtype else None
    if key is not None:
        return _first(key, self, dims, dest, SUM, False, cast)
    return reduce_into(self, dims, dest, SUM, cast=cast)


def sum_default(self: torch.Tensor, *, dtype: torch.dtype | None = None) -> torch.Tensor:
    key = ("sum", self.shape, self.stride(), self.dtype, None, False, dtype)
    got = _call(key, self)
    return got if got is not None else _sum(self, None, False, dtype, None, key)


def sum_dim(
    self: torch.Tensor, dim: Any, keepdim: bool = False, *, dtype: torch.dtype | None = None
) -> torch.Tensor:
    key = ("sum", self.shape, self.stride(), self.dtype, _dims_key(dim), keepdim, dtype)
    got = _call(key, self)
    return got if got is not None else _sum(self, dim, keepdim, dtype, None, key)


def sum_dim_out(
    self: torch.Tensor,
    dim: Any,
    keepdim: bool = False,
    *,
    dtype: torch.dtype | None = None,
    out: torch.Tensor,
) -> torch.Tensor:
    return _sum(self, dim, keepdim, dtype, out)


def sum_out(
    self: torch.Tensor, *, dtype: torch.dtype | None = None, out: torch.Tensor
) -> torch.Tensor:
    return _sum(self, None, False, dtype, out)


def _mean(self, dim, keepdim, dtype, out, key=None) -> torch.Tensor:
    dims = normalize_dims(self, dim)
    if dtype is not None and not (dtype.is_floating_point or dtype.is_complex):
        raise RuntimeError(
            "mean(): could not infer output dtype. Optional dtype must be either a floating "
            f"point or complex dtype. Got: {dtype_name(dtype)}"
        )
    in_dtype = dtype or self.dtype
    if not (in_dtype.is_floating_point or in_dtype.is_complex):
        raise RuntimeError(
            "mean(): could not infer output dtype. Input dtype must be either a floating "
            f"point or complex dtype. Got: {dtype_name(in_dtype)}"
        )
    out_dtype = dtype or (out.dtype if out is not None else self.dtype)
    if out is not None and out.dtype != out_dtype:
        raise RuntimeError(
            f"Expected out tensor to have dtype {out_dtype}, but got {out.dtype} instead"
        )
    acc_dtype(out_dtype)
    acc_dtype(self.dtype)
    dest = destination(reduced_shape(self, dims, keepdim), out_dtype, [self], out=out)
    cast = out_dtype if out_dtype != self.dtype else None
    if key is not None:
        return _first(key, self, dims, dest, SUM, True, cast)
    return reduce_into(self, dims, dest, SUM, mean=True, cast=cast)


def mean_default(self: torch.Tensor, *, dtype: torch.dtype | None = None) -> torch.Tensor:
    key = ("mean", self.shape, self.stride(), self.dtype, None, False, dtype)
    got = _call(key, self)
    return got if got is not None else _mean(self, None, False, dtype, None, key)


def mean_dim(
    self: torch.Tensor, dim: Any, keepdim: bool = False, *, dtype: torch.dtype | None = None
) -> torch.Tensor:
    key = ("mean", self.shape, self.stride(), self.dtype, _dims_key(dim), keepdim, dtype)
    got = _call(key, self)
    return got if got is not None else _mean(self, dim, keepdim, dtype, None, key)


def mean_out(
    self: torch.Tensor,
    dim: Any,
    keepdim: bool = False,
    *,
    dtype: torch.dtype | None = None,
    out: torch.Tensor,
) -> torch.Tensor:
    return _mean(self, dim, keepdim, dtype, out)


def mean_dtype_out(
    self: torch.Tensor, *, dtype: torch.dtype | None = None, out: torch.Tensor
) -> torch.Tensor:
    return _mean(self, None, False, dtype, out)


def _amax(self, dim, keepdim, out, key=None) -> torch.Tensor:
    dims = normalize_dims(self, dim)
    if self.numel() == 0:
        if dim is None or (not isinstance(dim, int) and len(dim) == 0):
            raise RuntimeError(
                "amax(): Expected reduction dim to be specified for input.numel() == 0. "
                "Specify the reduction dim with the 'dim' argument."
            )
        for d in dims:
            if self.shape[d] == 0:
                raise IndexError(f"amax(): Expected reduction dim {d} to have non-zero size.")
    if out is not None and out.dtype != self.dtype:
        raise RuntimeError(
            f"Expected the dtype for input and out to match, but got {dtype_name(self.dtype)} for "
            f"input's dtype and {dtype_name(out.dtype)} for out's dtype."
        )
    acc_dtype(self.dtype)
    dest = destination(reduced_shape(self, dims, keepdim), self.dtype, [self], out=out)
    if key is not None:
        return _first(key, self, dims, dest, MAX, False, None)
    return reduce_into(self, dims, dest, MAX)


def amax(self: torch.Tensor, dim: Any = (), keepdim: bool = False) -> torch.Tensor:
    key = ("amax", self.shape, self.stride(), self.dtype, _dims_key(dim), keepdim)
    got = _call(key, self)
    return got if got is not None else _amax(self, dim, keepdim, None, key)


def amax_out(
    self: torch.Tensor, dim: Any = (), keepdim: bool = False, *, out: torch.Tensor
) -> torch.Tensor:
    return _amax(self, dim, keepdim, out)
