"""Reductions (``sum``, ``mean``, ``amax``) over any set of dimensions of a strided
input: the plan and the launch of one 2-D kernel (rows = kept elements, columns =
reduced elements; the kernel and its device helpers are in :mod:`reduction_kernels`).
The ATen entry points that follow the schemas are in :mod:`reduction_ops` (their
argument rules: dims, dtypes, eager's errors, the result tensor, in
:mod:`reduction_rules`); the softmaxes, ``embedding`` and the convolutions' bias
gradient reduce through :func:`reduce_into` and the device helpers here. The tuning constants
below and the plan caches are read from this module at plan time:
``benchmarks/reproduce/device_profile.py --set reduction.NAME=VALUE`` and the tests set
them here.

How a call is launched (:func:`reduce_into`):

* The kept dims (in the output's row-major order) and the reduced dims (sorted by
  stride, so a transposed input still merges) are each merged where contiguous and
  addressed by at most two dims per side: row ``m`` and column ``n`` become
  ``offset(m) + offset(n)``, loaded straight from the input (no copy). A side that
  merges to one dim of stride 1 is a constexpr mode (``MODE_* == 0``), so the compiler
  sees the contiguity and vectorises. More than two dims on a side (rare) copies the
  input once, permuted so the kept dims lead (`.contiguous()`), which merges to one each.
* Each program owns ``BLOCK_M`` rows and loops over the columns in ``BLOCK_N`` chunks.
  Tiles are row-shaped (wide ``BLOCK_N``) when the reduced side is the contiguous one and
  column-shaped (wide ``BLOCK_M``) when the kept side is, so loads coalesce either way.
  A column sum (kept side contiguous) of up to :data:`COL_TALL_MAX_BYTES` a program
  reads every row of 16 bytes of columns in one program instead (no split, below). A
  program that reads one chunk reads it straight-line (``ONE_CHUNK``), so all of a
  thread's loads are in flight at once. A program that reads several full
  chunks pipelines them (:data:`STAGES`): the next chunks' loads are in flight while one
  is summed.
* One launch always. When the rows alone cannot fill the GPU (a whole-tensor ``sum``, a
  column sum of a few hundred columns), program ``(m, s)`` reduces the ``s``-th slice of
  its rows into a partial, and the last program of each row block to finish sums the
  partials (:mod:`reduction_kernels`): no second launch and no memset (the
  counters live in a kept scratch buffer, :func:`_scratch`, that each launch leaves at
  zero; declared with ``native_launch.keep_scratch``, so the C++ gate replays the launch
  with a scratch of its own). A split launch has about :data:`PROGRAMS_PER_SM` programs an SM, all resident
  at once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
import triton

from opbench.kernels._lib.launch import INTERPRETING as _INTERPRETING
from opbench.kernels._lib.launch import cdiv, next_pow2, remember
from opbench.kernels._lib.native_launch import keep_scratch
from opbench.kernels._lib.pointwise import index_type

# re-exported: softmax, softmax_long, embedding, the benchmarks and the tests import the
# kernel and its helpers from here
from opbench.kernels._lib.reduction_kernels import (  # noqa: F401
    _MAX_COMBINE,
    _reduce,
    _reduce_kernel,
    divided,
    max_nan,
    merge_side,
    offsets,
    row_max,
    row_sum,
    side_args,
    tl_dtype,
    used_values,
    vec_of,
)

# normalize_dims, reduced_shape and acc_dtype were defined here and stay importable from here
from opbench.kernels._lib.reduction_rules import (  # noqa: F401
    acc_dtype,
    normalize_dims,
    reduced_shape,
)

__all__ = [
    "MAX",
    "SUM",
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
]

#: Programs a split launch aims for on each SM (times the device's SM count, read once per
#: device: 528 on an H100's 132 SMs). Every plan's programs then fit on the GPU at once
#: (the pipelined 4-warp programs of the 256 MiB sums fit 9 (f16) or 6 (f32) to an SM:
#: registers and shared memory of the sm_90 build), so no second wave of whole programs
#: trails the first, and each program keeps two chunks in flight (16 KB f16, 32 KB f32:
#: 64-128 KB an SM, several times the latency x bandwidth product of one SM's share).
#: The plain loop kept one or two 16-byte loads a thread in flight; its grid was 16
#: programs an SM in several waves, and a 256 MiB sum read at 0.74 (f16) / 0.80 (f32) of
#: copy bandwidth on the H100, eager 0.83-0.86 (``benchmarks/reproduce/launch_profile.py
#: --sweep-sum`` measures both).
PROGRAMS_PER_SM = 4
#: A fixed program count in place of PROGRAMS_PER_SM x SMs (None): the interpreter's
#: plans, tests and sweeps.
TARGET_PROGRAMS: int | None = 4 if _INTERPRETING else None
#: The main loop, where a program reads at least PIPELINE_MIN_CHUNKS full chunks (a
#: one-chunk program, most small reductions, keeps the plain loop): ``STAGES`` > 1 is
#: Triton's software pipeline (``tl.range(num_stages=)``: cp.async copies of the next
#: STAGES - 1 chunks into shared memory while one is summed; Triton 3.6 and 3.9 pipeline
#: a loop's non-dot loads only when the loop asks), ``PINGPONG`` two chunks in registers
#: instead (chunk c + 1 loads while chunk c is summed; no shared memory, 79 (f16) / 92
#: (f32) registers). Either sums the chunks in the plain loop's order: the same bits.
#: Read from the sm_90 SASS of Triton 3.6 (ptxas 12.8) for the 256 MiB plans: the plain
#: loop issues each f16 16-byte load after the previous one's adds (one in flight a
#: thread; f32 two, 3.9's ptxas two and one); the staged one copies two chunks ahead (54
#: registers, 16 KB shared for f16; 56 and 32 KB for f32). A register prefetch written as
#: ``nxt = load(c + 1); acc += v; v = nxt`` does not survive ptxas 12.8: it copies ``nxt``
#: into ``v`` with MOVs at the loop's end, which wait for the loads.
STAGES = 3
PINGPONG = False
PIPELINE_MIN_CHUNKS = 2
#: A program that reads one chunk (most small reductions: every traced sum/mean but the
#: whole-tensor ones) reads it straight-line, not through the loops above: ptxas then
#: issues all of a thread's loads before the first add. In the loop (a trip count ptxas
#: cannot see) it issued each 16-byte load after the previous one's adds: one load a
#: thread in flight for the traced [128, 32] column tiles and [4, 1024] f16 row tiles,
#: four of their four or eight straight-line (sm_90 SASS, Triton 3.9). False: the loops.
STRAIGHT_ONE_CHUNK = True
#: ``eviction_policy`` of the main loop's loads ("" or "evict_first": streamed data). The
#: staged loop's cp.async copies drop it (they bypass L1 already, ``.cg``).
EVICT = ""
#: A split reads at least this many column chunks, and a split launch has at least
#: MIN_SPLITS splits. A split costs its programs a partial store, an atomic and, for the
#: last one, a load of the partials (two L2 round trips, about one chunk's latency each);
#: a row of fewer than MIN_SPLITS chunks is cheaper read by one program.
MIN_CHUNKS_PER_SPLIT = 1
MIN_SPLITS = 2 if _INTERPRETING else 4
#: Row-shaped tiles (reduced side contiguous), by the reduced length: (limit, BM, BN),
#: the first whose limit holds N. 4,096 elements a tile (32 a thread at 4 warps), as
#: narrow as N allows: N = 196 (a 14x14 mean) reads [16, 256] tiles, not [8, 512] ones
#: with 62% of the lanes masked. The last entry is the long-row tile, looped over (a warp
#: for every 1,024 of its elements: 4 at 4,096).
ROW_TILES = ((16, 256, 16), (32, 128, 32), (64, 64, 64), (128, 32, 128), (256, 16, 256),
             (512, 8, 512), (1024, 4, 1024), (2048, 2, 2048), (4096, 1, 4096),
             (None, 1, 4096))  # fmt: skip
#: A row longer than the widest ROW_TILES limit but at most this long is read by one
#: program in one chunk of next_pow2(N) elements, 32 a thread (8 or 16 warps): a
#: whole-tensor sum of 8,800 f16 elements is one program, one round of loads (it was one
#: 4-warp program looping over three chunks: 3.36 us on the H100, eager 2.53). Longer
#: rows split (one launch either way).
WIDE_ROW = 16384
#: Column-shaped tile (kept side contiguous): 128 contiguous rows x 32 reduced columns.
COL_TILE = (128, 32)
#: Where the kept side is contiguous (column sums), each program reads COL_TALL_BYTES of
#: every reduced row (one 16-byte vector: 8 f16 or 4 f32 columns; wider while there are
#: more programs than a split launch's target) from top to bottom and writes its result:
#: no split, so no partials, atomic and combine after the loads. Where that makes a
#: program read more than COL_TALL_MAX_BYTES, or fewer than COL_TALL_MIN_PROGRAMS
#: programs read an input larger than that, the COL_TILE plan splits the rows instead.
#: Read from the sm_90 SASS: the split [128, 32] tiles of the traced column sums
#: ([2048, 768], [1024, 1024], [256, 1024] f16) sat behind one 16-byte load a thread in
#: flight, then a partial store, a release atomic and the last program's load of the
#: partials; FlagGems (5.0.2, ``sum_dim_kernel_non_inner``) reads [1024, 8] tiles, 16
#: warps, no split, and ran them in 8.2 / 6.5 / 5.5 us on the H100 (ours 12.0 / 10.2 /
#: 7.3). COL_TALL_MAX_BYTES = 0 is the split plan everywhere.
COL_TALL_BYTES = 16
COL_TALL_MAX_BYTES = 32768
COL_TALL_MIN_PROGRAMS = 64
#: Elements of an unsplit column tile (its rows: COL_TALL_TILE // BLOCK_M, at most
#: next_pow2(N); a longer column loops, pipelined) and elements each thread loads of it
#: (num_warps = tile / 32 / COL_TALL_PER_THREAD, 1 to 16): [8, 2048] f16 is 16 warps of
#: four 16-byte loads a thread, all in flight at once.
COL_TALL_TILE = 16384
COL_TALL_PER_THREAD = 32
#: A row-tile plan (ROW_TILES) halves BLOCK_M while it has fewer programs than this (0:
#: never): FlagGems reads one row a program ([4, 512, 768] f32 mean over the last dim:
#: 2,048 programs, ours 512 of [4, 1024]).
ROW_MIN_PROGRAMS = 0
#: Bytes each thread loads of a ROW_TILES tile (num_warps = tile bytes / 32 / this, at
#: least 4; the long-row tile and WIDE_ROW keep theirs): 64 is four 16-byte loads, all
#: of which ptxas issues before the first add; at 128 (an f32 [4, 1024] tile on 4 warps,
#: the traced [4, 512, 768] mean) it issues four, waits for the first, then four more
#: (sm_90 SASS, Triton 3.9). f16 tiles keep 4 warps either way.
ROW_BYTES_PER_THREAD = 64
#: Elements of the last program's [BLOCK_M, SPLIT_BLOCK] tile of partials: 8192 holds
#: the 64 splits of a [128, 32]-tiled column sum of 2,048 rows in one tile (sm_90, Triton
#: 3.9: 9 of its 16 loads a thread in flight before the first add, 56 registers; 4096:
#: two tiles, at most 5 in flight). The whole-tensor sums (BLOCK_M 1) keep one tile of up
#: to 1,024 partials either way (256 MiB f16: 54 -> 56 registers, 9 programs an SM).
COMBINE_TILE = 8192
#: The combine's tiles of partials are unrolled (their loads issued together) up to this
#: many, a loop beyond: in a loop ptxas issues each 16-byte load of the [128, 32] tiles
#: after the previous one's adds (sm_90 SASS of the [16, 128, 128] column sum's combine:
#: one load a thread in flight, 16 in a row, L2 latency each).
COMBINE_UNROLL = 8
#: Tile elements under the interpreter: big tiles, few programs (it runs them one by one).
_INTERP_TILE = 16384

SUM, MAX = 0, 1


# ----------------------------------------------------------------------------- launching


def _tile(
    M: int, N: int, m_args: tuple, n_args: tuple, elem: int, target: int
) -> tuple[int, int, int, bool]:
    """``(BLOCK_M, BLOCK_N, num_warps, whether the columns may split)`` for M rows of N
    reduced elements of ``elem`` bytes, ``target`` programs a split launch aims for."""
    if _INTERPRETING:
        bn = min(next_pow2(max(N, 1)), _INTERP_TILE)
        bm = min(next_pow2(max(M, 1)), max(1, _INTERP_TILE // bn))
        return bm, bn, 4, True
    if m_args[0] in (0, 3) and n_args[0] not in (0, 3):
        tall = _tall_tile(M, N, elem, target)
        return (*COL_TILE, 4, True) if tall is None else (*tall, False)
    for limit, bm, bn in ROW_TILES:
        if limit is not None and N <= limit:
            bm = min(bm, next_pow2(M))
            while bm > 1 and cdiv(M, bm) < ROW_MIN_PROGRAMS:
                bm //= 2
            return bm, bn, max(4, min(16, bm * bn * elem // (32 * ROW_BYTES_PER_THREAD))), True
    if N <= WIDE_ROW:
        bn = next_pow2(N)
        return 1, bn, max(4, min(16, bn // 1024)), True
    _, bm, bn = ROW_TILES[-1]
    return bm, bn, max(4, bm * bn // 1024), True  # 32 elements a thread


def _tall_tile(M: int, N: int, elem: int, target: int) -> tuple[int, int, int] | None:
    """``(BLOCK_M, BLOCK_N, num_warps)`` of the unsplit column plan (:data:`COL_TALL_MAX_BYTES`)
    for M contiguous kept columns of N reduced rows, or None where the split plan reads
    them: COL_TALL_BYTES of each row a program, wider while there are more than
    ``target`` programs (up to COL_TILE's width), every row of the program's columns in
    tiles of up to COL_TALL_TILE elements, COL_TALL_PER_THREAD of them a thread."""
    if N == 0:
        return None
    bm = max(1, COL_TALL_BYTES // elem)
    while bm < COL_TILE[0] and cdiv(M, bm) > target:
        bm *= 2
    if N * bm * elem > COL_TALL_MAX_BYTES:
        return None
    if cdiv(M, bm) < COL_TALL_MIN_PROGRAMS and M * N * elem > COL_TALL_MAX_BYTES:
        return None
    bn = min(next_pow2(N), max(1, COL_TALL_TILE // bm))
    return bm, bn, max(1, min(16, bm * bn // (32 * COL_TALL_PER_THREAD)))


#: device index -> its SM count (``torch.cuda.get_device_properties`` costs microseconds)
_SMS: dict[int, int] = {}
#: SMs assumed for a plan on the CPU (the interpreter's tests of the GPU plans): an H100.
_CPU_SMS = 132


def _target_programs(x: torch.Tensor) -> int:
    """Programs a split launch over ``x``'s device aims for: :data:`TARGET_PROGRAMS`
    where set, else :data:`PROGRAMS_PER_SM` on each SM."""
    if TARGET_PROGRAMS is not None:
        return TARGET_PROGRAMS
    dev = x.get_device()
    sms = _SMS.get(dev)
    if sms is None:
        sms = torch.cuda.get_device_properties(dev).multi_processor_count if dev >= 0 else _CPU_SMS
        _SMS[dev] = sms
    return sms * PROGRAMS_PER_SM


def _divisor(n: int, vec: int) -> int:
    """The largest of vec, vec/2, ... 1 dividing ``n``."""
    while n % vec:
        vec //= 2
    return vec


def _launch_plan(
    shape: Sequence[int], stride: Sequence[int], elem: int, M: int, N: int,
    m_args: tuple, n_args: tuple, acc: torch.dtype, target: int,
) -> tuple[tuple[int, int], tuple[int, ...], dict[str, Any], tuple | None]:  # fmt: skip
    """The one launch that reduces an input of ``shape``/``stride`` (``elem`` bytes an
    element; rows ``m_args``, columns ``n_args``) to M values with about ``target``
    programs at most where the columns split: grid, the kernel's integers, the
    constexprs that depend on the shape, and what a split needs of the scratch buffers
    (:func:`_scratch`: accumulate dtype, partials, counters) or None."""
    bm, bn, warps, may_split = _tile(M, N, m_args, n_args, elem, target)
    cap = 16 // elem
    used = used_values(m_args) + used_values(n_args)
    vec = next((v for v in (8, 4, 2) if v <= cap and all(u % v == 0 for u in used)), 1)
    mode_m, (md1, ms0, ms1) = m_args[0], divided(m_args, vec)
    mode_n, (nd1, ns0, ns1) = n_args[0], divided(n_args, vec)
    # the mask of the contiguous side is constant over a vector where its length divides
    mvec = _divisor(M, vec) if mode_m in (0, 3) else 1
    nvec = _divisor(N, vec) if mode_n in (0, 3) else 1
    programs = cdiv(M, bm)
    chunks = cdiv(N, bn)
    splits = 1
    if may_split and programs < target and chunks >= MIN_SPLITS * MIN_CHUNKS_PER_SPLIT:
        splits = min(cdiv(target, programs), chunks // MIN_CHUNKS_PER_SPLIT)
        if splits < MIN_SPLITS:
            splits = 1
    per_split = max(1, cdiv(chunks, splits))  # in chunks
    splits = max(1, cdiv(chunks, per_split))
    pipelined = min(per_split, N // bn) >= PIPELINE_MIN_CHUNKS
    sb = min(next_pow2(splits), max(1, COMBINE_TILE // bm)) if splits > 1 else 0
    iters = cdiv(splits, sb) if sb else 0  # tiles of partials the combine reads
    # the indices (rows, columns, partial-buffer slots) and x's offsets: its extent
    idx = index_type(max(M * (splits + sb), M + bm, N + per_split * bn), shape, [stride])
    need = (acc, M * splits, programs) if splits > 1 else None
    return (
        (programs, splits),
        (M // mvec, N // nvec, per_split, md1, ms0, ms1, nd1, ns0, ns1),
        dict(MODE_M=mode_m, MODE_N=mode_n, VEC=vec, MVEC=mvec, NVEC=nvec, BLOCK_M=bm,
             BLOCK_N=bn, IDX=idx, SPLIT_BLOCK=sb, STAGES=STAGES if pipelined else 1,
             PINGPONG=PINGPONG and pipelined, EVICT=EVICT,
             ONE_CHUNK=STRAIGHT_ONE_CHUNK and per_split == 1,
             COMBINE_ITERS=iters if iters <= COMBINE_UNROLL else 0, num_warps=warps),
        need,
    )  # fmt: skip


#: (device index, stream, accumulate dtype) -> (partials, counters): the split plan's
#: scratch, kept from call to call. The counters start at zero (``torch.zeros``, once)
#: and every launch leaves them at zero (its last program of each row block resets its
#: own), so a call needs no memset; launches on one stream run one after another, so
#: they can share the buffers, and another stream gets its own.
_SCRATCH: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}
_STREAM: list[Any] = []  # Triton's current-stream query, found on the first CUDA split


def _scratch(x: torch.Tensor, need: tuple) -> tuple[torch.Tensor, torch.Tensor]:
    acc, parts, counters = need
    dev = x.get_device()
    if dev < 0:
        stream = 0
    else:
        if not _STREAM:
            _STREAM.append(triton.runtime.driver.active.get_current_stream)
        stream = _STREAM[0](dev)
    key = (dev, stream, acc)
    hit = _SCRATCH.get(key)
    if hit is None or hit[0].numel() < parts or hit[1].numel() < counters:
        fresh = (
            torch.empty(next_pow2(max(parts, 4096)), dtype=acc, device=x.device),
            torch.zeros(next_pow2(max(counters, 256)), dtype=torch.int32, device=x.device),
        )
        if dev >= 0 and torch.cuda.is_current_stream_capturing():
            # a CUDA graph records the zeroing without running it: scratch made now is
            # the graph's alone (zeroed on every replay of it), never kept for the stream
            return fresh
        # kept: the C++ gate's replay keeps its own (zeroed once per stream) in their place
        hit = (keep_scratch(fresh[0]), keep_scratch(fresh[1]))
        _SCRATCH[key] = hit
    return hit


def _launch(x: torch.Tensor, out: torch.Tensor, launch: tuple) -> None:
    """Run :func:`_reduce_plan`'s launch of ``x`` into ``out``."""
    grid, tail, consts, need = launch
    if need is None:
        _reduce(grid, (x, out, out, out, *tail), **consts)
    else:
        part, cnt = _scratch(x, need)
        _reduce(grid, (x, out, part, cnt, *tail), **consts)


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
    permute, launch = plan
    if permute is not None:
        x = x.permute(*permute).contiguous()
    target = dest
    if not dest.is_contiguous():
        target = torch.empty(dest.shape, dtype=dest.dtype, device=dest.device)
    _launch(x, target, launch)
    if target is not dest:
        dest.copy_(target)
    return plan


#: (input layout and dtype, dims, result dtype, op, mean, cast) -> :func:`_reduce_plan`'s
#: plan: the planning (merged sides, tiles, splits, index type) cost more host time than
#: the launches, and models reduce the same layouts over and over. Cleared with
#: :data:`opbench.kernels._lib.reduction_ops._CALLS` after a change of the tiles
#: (``benchmarks/reproduce/launch_profile.py``).
_PLANS: dict[tuple, Any] = {}
_NOTHING = object()  # no kept element: nothing to launch


def _reduce_plan(
    x: torch.Tensor, dims: list[int], dest_dtype: torch.dtype, op: int, mean: bool,
    cast: torch.dtype | None,
) -> Any:  # fmt: skip
    """``(permutation or None, launch)``, or :data:`_NOTHING`. The launch: ``(grid, the
    kernel's arguments after the four pointers, every constexpr, the scratch a split
    needs or None)``."""
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
    grid, ints, consts, need = _launch_plan(
        shape, stride, x.element_size(), M, N, m_args, n_args, acc, _target_programs(x)
    )
    consts = dict(OP=op, MEAN=mean, CAST=cast_tl, ACC=tl_dtype(acc), **consts)
    return permute, (grid, (*ints, init, denom), consts, need)
