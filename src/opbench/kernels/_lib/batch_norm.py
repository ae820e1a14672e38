"""Batch norm's forward (``native_batch_norm``): Triton kernels, their launchers and the
ATen-schema entry point, on the helpers of :mod:`opbench.kernels._lib.norm` (compute
types, stat dtypes, reductions); the layout, tiling and plan helpers here serve the
backward too (:mod:`opbench.kernels._lib.batch_norm_backward`).

Numerics as in layer norm: fp32 (f64 for f64) accumulation, variance from centred
values (Chan's merge of per-tile mean and M2), running stats updated in place with the
unbiased variance. Metadata follows eager on its device: ``save_mean``/``save_invstd``
have shape ``[C]``; on CUDA the accumulate type, in eval mode a copy of ``running_mean``
and ``1/sqrt(running_var + eps)``; on the CPU the input's dtype (float32 when an f16/bf16
input has float32 parameters), and empty (``[0]``) in eval mode.

The input is viewed as ``[N, C, S]`` (spatial dims merged; contiguous NCHW has strides
``(C*S, S, 1)``, channels-last ``(S*C, 1, C)``) and worked on in tiles of
``[BLOCK_R, BLOCK_C]`` (rows ``r = n*S + s``, channels ``c``): ``BLOCK_C = 1`` when the
channel stride is not 1 (NCHW: a tile runs along ``s``), up to ``BN_BLOCK_C`` channels
when it is (channels-last, 2-D inputs). Statistics are split over ``SPLIT`` row ranges
per channel block, so a few channels with many rows still fill the GPU; the partial
count/mean/M2 are merged by the apply kernel's own programs where that is cheap
(``BN_FOLD_RATIO``), else by a finalize launch. The partials and the finalized
statistics share one scratch allocation.

Host path: each op keeps a plan per key (shapes, strides, dtypes, devices, which
optional tensors are None, mode, output_mask) holding grids, block sizes, constexprs and
output layouts, so a repeat call only allocates and launches.
``benchmarks/reproduce/host_profile.py --python-only`` (launches stubbed, this repo's CPU
container) on the traced cases' first four: native_batch_norm 27-29 µs -> ~11 µs of
Python per call (see the commit for the per-case numbers).
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from opbench.kernels._lib import batch_norm_planes as planes
from opbench.kernels._lib.batch_norm_planes import bn_finish, bn_running_stats
from opbench.kernels._lib.launch import Launcher, cdiv, jit_unspecialized, next_pow2, remember
from opbench.kernels._lib.native_launch import declare_replay
from opbench.kernels._lib.norm import (
    _INTERPRETING,
    _pkey,
    compute_types,
    stat_dtype,
    sum_f,
    warps_for,
)
from opbench.kernels._lib.pointwise import index_type
from opbench.kernels._lib.proven import common_power_of_two, multiple

__all__ = ["batch_norm"]


#: Batch-norm tiles: elements per tile and the widest channel block (channels-last).
BN_TILE = 4096 if not _INTERPRETING else 65536
BN_BLOCK_C = 64
#: Programs the statistics pass of the row kernels aims for (channel blocks x row splits).
#: 256, from 1,024, on the tuning half's 8 most used such rows (H200, 2026-12-02, device
#: time, ``bn-row-settings-h200-2026-12-02.md``): forward 1.19x, backward 1.06x faster
#: (fewer, longer splits: a shorter merge and, under :data:`BN_FOLD_RATIO`, more apply
#: kernels merging themselves); 4,096 lost (0.95x, 0.98x). Held out, judged after: 1.01x,
#: 1.00x (3 rows).
BN_TARGET_PROGRAMS = 256 if not _INTERPRETING else 1
#: Channels per program of the finalize kernels: few, so a row kernel's channels (128-768
#: on the traced 2-D rows) spread over several programs. 128 lost on the tuning half
#: (0.91x forward, 0.97x backward; ``bn-row-settings-h200-2026-12-02.md``).
BN_FINALIZE_BLOCK = 32 if not _INTERPRETING else 4096
#: Elements of the ``[splits, channels]`` tile a merge of the statistics' partials reads a
#: step (:func:`merge_rows`). Why: the merge read one split's partials a step, a chain of
#: ``split`` dependent global loads; the 2-D rows' statistics split 98-392 ways (one
#: 64-row tile a program), and the H200 took 50-144 us a forward on ``[6272, 256]`` to
#: ``[25088, 128]`` f16 rows that eager did in 24-45 (``bn-row-vectors-h200-2026-12-02.md``):
#: the longer the chain, the slower, whatever the bytes. Tiled, the same rows ran 1.82x
#: (forward) and 1.53x (backward) faster, 1.08x and 0.96x eager (H200, 2026-12-02,
#: ``bn-row-merge-h200-2026-12-02.md``). 1,024 lost on the tuning half (0.99x forward,
#: 0.94x backward; ``bn-row-settings-h200-2026-12-02.md``).
BN_MERGE_TILE = 4096
#: The apply kernels merge a channel block's ``split`` partial rows themselves (one
#: launch fewer) when ``split * BN_FOLD_RATIO <= BLOCK_R``: up to 3 loads per split
#: row against ``BLOCK_R`` loads of the tile, so the merge stays under ~1/16 of a
#: program's reads (NCHW tiles of 4096 rows fold up to split 85; channels-last tiles of
#: 64 rows fold only unsplit statistics). A bound by arithmetic, not yet timed on a GPU.
BN_FOLD_RATIO = 48
#: The row kernels (channels-last and 2-D inputs) read and write a row's channels as
#: vectors where the strides allow (:func:`row_vector`): their sm_90 code made every
#: access 2 bytes wide (``ptx-survey-2026-12-01.md``: ``sC`` and the row stride arrive
#: as unspecialized integers) and with it 4-byte or 16-byte ones. On since the H200's
#: device-time A/B on the 8 most used such rows of each half (2026-12-02,
#: ``benchmarks/results/bn-row-vectors-h200-2026-12-02.md``, both settings checked
#: against eager): decided on the tuning half, forward 2.00x and backward 2.61x faster;
#: the held-out half read 2.17x and 1.01x (its one backward row that runs here).
BN_ROW_VECTORS = True


# ----------------------------------------------------------------------------- batch norm


@triton.jit
def _bn_offsets(rs, cs, S, sN, sC, sS, MERGED: tl.constexpr, CV: tl.constexpr):
    """Memory offsets of rows ``rs`` (r = n*S + s) and channels ``cs`` in an [N, C, S]
    view with strides (sN, sC, sS); MERGED: the rows are one stride apart (``sS`` is it,
    see :func:`rows_strides`), no per-element division. ``CV`` > 1 (:func:`row_vector`):
    the host found ``sC`` 1 and ``sN``, ``sS`` multiples of ``CV``, said here as Triton
    reads it, so a row's channels load and store ``CV`` at a time."""
    if CV > 1:
        sN, sS = multiple(sN, CV), multiple(sS, CV)
        chan = cs
    else:
        chan = cs * sC
    if MERGED:
        return (rs * sS)[:, None] + chan[None, :]
    n = rs // S
    s = rs - n * S
    return (n * sN + s * sS)[:, None] + chan[None, :]


@triton.jit
def row_channels(C, CV: tl.constexpr):
    """The channel count, restated as a multiple of ``CV`` (the host's proof, so the
    channel mask is constant over ``CV`` channels)."""
    if CV > 1:
        C = multiple(C, CV)
    return C


@triton.jit
def split_tile(j0, js, split, cs, cmask, C):
    """(mask, offsets) of the ``[BLOCK_S, channels]`` tile of partials ``part[., j, c]``
    for splits ``j0 + js`` and channels ``cs``: the merges' step over ``split`` rows of
    ``C`` (:data:`BN_MERGE_TILE`)."""
    j = j0 + js
    return (j < split)[:, None] & cmask[None, :], j[:, None] * C + cs[None, :]


@triton.jit(
    do_not_specialize=["C", "S", "R", "sN", "sC", "sS", "rows_per_split", "n_cblocks", "split"]
)
def _bn_stats_kernel(
    x_ptr, part_ptr,
    C: tl.int64, S: tl.int64, R: tl.int64, sN: tl.int64, sC: tl.int64, sS: tl.int64,
    rows_per_split: tl.int64, n_cblocks: tl.int64, split: tl.int64,
    MERGED: tl.constexpr, CV: tl.constexpr, COMPUTE: tl.constexpr, BLOCK_R: tl.constexpr,
    BLOCK_C: tl.constexpr,
):  # fmt: skip
    """Per channel and row range: count, mean and M2 into part[3, split, C], from per-lane
    sums of the values shifted by the first tile's column means (as the planes kernels:
    no reduction per tile, and no cancellation for values far from zero)."""
    pid = tl.program_id(0).to(tl.int64)
    pid_c = pid % n_cblocks
    pid_s = pid // n_cblocks
    C = row_channels(C, CV)
    cs = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    cmask = cs < C
    r0 = pid_s * rows_per_split
    r1 = tl.minimum(r0 + rows_per_split, R)
    rs = r0 + tl.arange(0, BLOCK_R)
    mask = (rs < r1)[:, None] & cmask[None, :]
    x = tl.load(x_ptr + _bn_offsets(rs, cs, S, sN, sC, sS, MERGED, CV), mask=mask, other=0.0)
    k = sum_f(x.to(COMPUTE), axis=0) / tl.maximum(
        sum_f(tl.where(mask, 1.0, 0.0).to(COMPUTE), axis=0), 1.0
    )
    s1 = tl.full([BLOCK_R, BLOCK_C], 0, COMPUTE)
    s2 = tl.full([BLOCK_R, BLOCK_C], 0, COMPUTE)
    n = tl.full([BLOCK_R, BLOCK_C], 0, COMPUTE)
    for start in range(r0, r1, BLOCK_R):
        rs = start + tl.arange(0, BLOCK_R)
        mask = (rs < r1)[:, None] & cmask[None, :]
        x = tl.load(x_ptr + _bn_offsets(rs, cs, S, sN, sC, sS, MERGED, CV), mask=mask, other=0.0)
        d = tl.where(mask, x.to(COMPUTE) - k[None, :], 0.0)
        s1 += d
        s2 += d * d
        n += tl.where(mask, 1.0, 0.0).to(COMPUTE)
    count = sum_f(n, axis=0)
    t1 = sum_f(s1, axis=0)
    nn = tl.maximum(count, 1.0)
    mean = k + t1 / nn
    m2 = tl.maximum(sum_f(s2, axis=0) - t1 * t1 / nn, 0.0)
    off = pid_s * C + cs
    tl.store(part_ptr + off, count, mask=cmask)
    tl.store(part_ptr + split * C + off, mean, mask=cmask)
    tl.store(part_ptr + 2 * split * C + off, m2, mask=cmask)


@triton.jit
def _bn_channel_stats(
    part_ptr, rm_ptr, rv_ptr, save_mean_ptr, save_invstd_ptr, cs, cmask, wmask,
    C, split, rm_stride, rv_stride, eps, momentum,
    TRAINING: tl.constexpr, HAS_RUNNING: tl.constexpr, HAS_SAVE: tl.constexpr,
    COMPUTE: tl.constexpr, BLOCK: tl.constexpr, BLOCK_S: tl.constexpr,
):  # fmt: skip
    """(mean, invstd) of channels ``cs``: merged from the partials part[3, split, C] when
    training, from the running statistics in eval mode. Where ``wmask`` (the program
    that owns the channels), the running statistics are updated and the saved ones
    written.

    The merge reads ``BLOCK_S`` splits a step (:data:`BN_MERGE_TILE` says why) in two
    passes: the count-weighted mean, then ``M2 = sum(m2_j + n_j (mean_j - mean)^2)``, the
    parallel form of Chan's merge, whose terms are each >= 0 (no cancellation)."""
    if TRAINING:
        js = tl.arange(0, BLOCK_S)
        n_acc = tl.full([BLOCK_S, BLOCK], 0, COMPUTE)
        s_acc = tl.full([BLOCK_S, BLOCK], 0, COMPUTE)
        for j0 in range(0, split, BLOCK_S):
            m, off = split_tile(j0, js, split, cs, cmask, C)
            cnt = tl.load(part_ptr + off, mask=m, other=0.0)
            n_acc += cnt
            s_acc += cnt * tl.load(part_ptr + split * C + off, mask=m, other=0.0)
        count = sum_f(n_acc, axis=0)
        mean = sum_f(s_acc, axis=0) / tl.maximum(count, 1.0)
        q_acc = tl.full([BLOCK_S, BLOCK], 0, COMPUTE)
        for j0 in range(0, split, BLOCK_S):
            m, off = split_tile(j0, js, split, cs, cmask, C)
            cnt = tl.load(part_ptr + off, mask=m, other=0.0)
            d = tl.load(part_ptr + split * C + off, mask=m, other=0.0) - mean[None, :]
            q_acc += tl.load(part_ptr + 2 * split * C + off, mask=m, other=0.0) + cnt * d * d
        m2 = sum_f(q_acc, axis=0)
        invstd = bn_finish(
            count, mean, m2, cs, wmask, rm_ptr, rv_ptr, save_mean_ptr, save_invstd_ptr,
            rm_stride, rv_stride, eps, momentum, HAS_RUNNING, HAS_SAVE, COMPUTE,
        )  # fmt: skip
    else:
        mean, invstd = bn_running_stats(
            rm_ptr, rv_ptr, save_mean_ptr, save_invstd_ptr, cs, cmask, wmask, rm_stride,
            rv_stride, eps, HAS_SAVE, COMPUTE,
        )  # fmt: skip
    return mean, invstd


@jit_unspecialized
def _bn_finalize_kernel(
    part_ptr, rm_ptr, rv_ptr, save_mean_ptr, save_invstd_ptr,
    C: tl.int64, split: tl.int64, stat_off: tl.int64, rm_stride: tl.int64,
    rv_stride: tl.int64, eps: tl.float64, momentum: tl.float64,
    TRAINING: tl.constexpr, HAS_RUNNING: tl.constexpr, HAS_SAVE: tl.constexpr,
    COMPUTE: tl.constexpr, BLOCK: tl.constexpr, BLOCK_S: tl.constexpr,
):  # fmt: skip
    """mean and invstd per channel into stat[2, C] at ``part_ptr + stat_off`` (and the
    saved statistics, and the running ones updated), for an apply kernel that does not
    merge the partials itself."""
    pid = tl.program_id(0).to(tl.int64)
    cs = pid * BLOCK + tl.arange(0, BLOCK)
    cmask = cs < C
    mean, invstd = _bn_channel_stats(
        part_ptr, rm_ptr, rv_ptr, save_mean_ptr, save_invstd_ptr, cs, cmask, cmask,
        C, split, rm_stride, rv_stride, eps, momentum,
        TRAINING, HAS_RUNNING, HAS_SAVE, COMPUTE, BLOCK, BLOCK_S,
    )  # fmt: skip
    tl.store(part_ptr + stat_off + cs, mean, mask=cmask)
    tl.store(part_ptr + stat_off + C + cs, invstd, mask=cmask)


# Like batch_norm_backward._bn_bwd_apply_kernel's arguments, kept apart: the forward's y,
# not the backward's dx, dw, db
@jit_unspecialized
def _bn_apply_kernel(
    x_ptr, y_ptr, part_ptr, rm_ptr, rv_ptr, save_mean_ptr, save_invstd_ptr, w_ptr, b_ptr,
    C: tl.int64, S: tl.int64, R: tl.int64,
    xsN: tl.int64, xsC: tl.int64, xsS: tl.int64, ysN: tl.int64, ysC: tl.int64, ysS: tl.int64,
    n_cblocks: tl.int64, split: tl.int64, stat_off: tl.int64, rm_stride: tl.int64,
    rv_stride: tl.int64, eps: tl.float64, momentum: tl.float64,
    FOLD: tl.constexpr, TRAINING: tl.constexpr, HAS_RUNNING: tl.constexpr,
    HAS_SAVE: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr, MERGED: tl.constexpr,
    CV: tl.constexpr, COMPUTE: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr,
    BLOCK_S: tl.constexpr,
):  # fmt: skip
    """y = (x - mean[c]) * invstd[c] * w[c] + b[c]. FOLD: every program works out its
    channels' mean and invstd (:func:`_bn_channel_stats`) and the programs of the first
    row block write the saved and running statistics, in place of a finalize launch;
    else they are read from stat[2, C] at ``part_ptr + stat_off``."""
    pid = tl.program_id(0).to(tl.int64)
    pid_c = pid % n_cblocks
    pid_r = pid // n_cblocks
    C = row_channels(C, CV)
    cs = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    cmask = cs < C
    rs = pid_r * BLOCK_R + tl.arange(0, BLOCK_R)
    mask = (rs < R)[:, None] & cmask[None, :]
    if FOLD:
        mean, scale = _bn_channel_stats(
            part_ptr, rm_ptr, rv_ptr, save_mean_ptr, save_invstd_ptr, cs, cmask,
            cmask & ((cs * 0 + pid_r) == 0), C, split, rm_stride, rv_stride, eps, momentum,
            TRAINING, HAS_RUNNING, HAS_SAVE, COMPUTE, BLOCK_C, BLOCK_S,
        )  # fmt: skip
    else:
        mean = tl.load(part_ptr + stat_off + cs, mask=cmask, other=0.0)
        scale = tl.load(part_ptr + stat_off + C + cs, mask=cmask, other=0.0)
    if HAS_W:
        scale = scale * tl.load(w_ptr + cs, mask=cmask, other=0.0).to(COMPUTE)
    shift = mean * 0.0
    if HAS_B:
        shift = tl.load(b_ptr + cs, mask=cmask, other=0.0).to(COMPUTE)
    x = tl.load(x_ptr + _bn_offsets(rs, cs, S, xsN, xsC, xsS, MERGED, CV), mask=mask, other=0.0)
    # (x - mean) * scale, not x * scale - mean * scale: see batch_norm_planes._bnp_normalize
    y = (x.to(COMPUTE) - mean[None, :]) * scale[None, :] + shift[None, :]
    y_off = _bn_offsets(rs, cs, S, ysN, ysC, ysS, MERGED, CV)
    tl.store(y_ptr + y_off, y.to(y_ptr.dtype.element_ty), mask=mask)


_bn_stats = Launcher(_bn_stats_kernel)
_bn_finalize = Launcher(_bn_finalize_kernel)
_bn_apply = Launcher(_bn_apply_kernel)


def _ncs(t: torch.Tensor) -> tuple[int, int, int] | None:
    """Strides (sN, sC, sS) of ``t`` viewed as [N, C, S] (spatial dims merged), or None
    when the spatial dims do not merge into one stride."""
    spatial = [(t.shape[i], t.stride(i)) for i in range(2, t.dim()) if t.shape[i] != 1]
    for (_, st0), (s1, st1) in zip(spatial, spatial[1:]):
        if st0 != st1 * s1:
            return None
    s_s = spatial[-1][1] if spatial else 1
    return t.stride(0), t.stride(1), s_s


def _like_format(t: torch.Tensor) -> torch.memory_format | None:
    """ATen's ``suggest_memory_format`` of ``t`` where it is channels-last, else None
    (contiguous): the layout of eager's CPU batch norm outputs."""
    if not t.is_contiguous():
        for fmt, nd in ((torch.channels_last, 4), (torch.channels_last_3d, 5)):
            if t.dim() == nd and t.is_contiguous(memory_format=fmt):
                return fmt
    return None


def _alloc_like(t: torch.Tensor, fmt: torch.memory_format | None) -> torch.Tensor:
    if fmt is None:
        return torch.empty(t.shape, dtype=t.dtype, device=t.device)
    return torch.empty_like(t, memory_format=fmt)


def _bn_blocks(C: int, s_c: int, R: int) -> tuple[int, int]:
    """(BLOCK_R, BLOCK_C): channel blocks only when channels are adjacent in memory."""
    block_c = min(BN_BLOCK_C, next_pow2(C)) if s_c == 1 and C > 1 else 1
    block_r = min(BN_TILE // block_c, max(16, next_pow2(max(R, 1))))
    return block_r, block_c


def _bn_split(C: int, R: int, block_r: int, block_c: int) -> tuple[int, int, int]:
    """(channel blocks, row splits, rows per split) of a reduction pass."""
    n_cblocks = cdiv(C, block_c)
    r_blocks = max(1, cdiv(R, block_r))
    split = max(1, min(r_blocks, BN_TARGET_PROGRAMS // n_cblocks))
    rows_per_split = cdiv(r_blocks, split) * block_r
    return n_cblocks, cdiv(max(R, 1), rows_per_split), rows_per_split


def _bn_tiling(C: int, s_c: int, R: int) -> tuple[int, int, int, int, int, int]:
    """(BLOCK_R, BLOCK_C, channel blocks, row splits, rows per split, warps): the forward
    and the backward tile their passes alike."""
    block_r, block_c = _bn_blocks(C, s_c, R)
    return (block_r, block_c, *_bn_split(C, R, block_r, block_c), warps_for(block_r * block_c))


def _ncs_or_copy(t: torch.Tensor) -> tuple[tuple[int, int, int], bool]:
    """``t``'s [N, C, S] strides and False, or where it has none (dims that do not merge)
    those of the contiguous copy the kernels then read, and True."""
    st = _ncs(t)
    if st is not None:
        return st, False
    return _ncs(t.contiguous()), True  # type: ignore[return-value]


def _bn_check_param(p: torch.Tensor | None, C: int) -> None:
    if p is not None and p.numel() != C:
        raise RuntimeError(f"expected a tensor of {C} elements, got {list(p.shape)}")


def _bn_shape(input: torch.Tensor) -> tuple[int, int, int]:
    if input.dim() < 2:
        raise RuntimeError(f"batch norm expects an input of at least 2 dims, got {input.dim()}")
    N, C = input.shape[0], input.shape[1]
    S = 1
    for s in input.shape[2:]:
        S *= s
    return N, C, S


def _rkey(p: torch.Tensor | None) -> tuple | None:
    return None if p is None else (p.shape, p.dtype, p.stride())


def _fold(split: int, block_r: int) -> bool:
    """Whether the apply kernel merges the split partials itself (no finalize launch)."""
    return split * BN_FOLD_RATIO <= block_r


def merge_rows(split: int, block: int) -> int:
    """``BLOCK_S``: the splits a merge of ``block`` channels reads a step, every split at
    once up to :data:`BN_MERGE_TILE` elements of tile."""
    return max(1, min(next_pow2(max(split, 1)), BN_MERGE_TILE // max(block, 1)))


def planes_layout(C: int, s_c: int) -> bool:
    """Whether the channels are not adjacent in memory (NCHW): the planes kernels of
    :mod:`~opbench.kernels._lib.batch_norm_planes` then serve, not the row tiles here."""
    return s_c != 1 or C == 1


def row_vector(C: int, *strides: tuple[int, int, int]) -> int:
    """The row kernels' ``CV``: the widest of 8, 4, 2, 1 channels a vector where every
    tensor's channels are adjacent (``sC`` 1) and ``C`` and every row and image stride
    are multiples of it (so each row's first channel keeps the tensor's alignment); 1
    where :data:`BN_ROW_VECTORS` is off."""
    if not BN_ROW_VECTORS or any(st[1] != 1 for st in strides):
        return 1
    return common_power_of_two(C, *(v for st in strides for v in (st[0], st[2])))


def rows_strides(S: int, *strides: tuple[int, int, int]) -> tuple[bool, tuple]:
    """(MERGED, strides) for the row-tile kernels: where every tensor's rows ``r = n*S + s``
    are one stride apart (``S == 1``, or ``sN == S * sS``: channels-last and 2-D inputs),
    each tensor's ``sS`` replaced by that stride, and the kernels skip the per-element
    division of ``r`` into ``(n, s)``."""
    if not all(S == 1 or st[0] == S * st[2] for st in strides):
        return False, strides
    return True, tuple((st[0], st[1], st[0] if S == 1 else st[2]) for st in strides)


# key -> (save_len, stat dtype, y's channels-last format or None, y's [N, C, S] strides
# or None (written through a contiguous copy), input needs a copy, scratch elements,
# buffer dtype, stats launch, finalize launch, apply launch: each (grid, ints,
# constexprs) or None)
_BN_FWD_PLANS: dict[tuple, tuple] = {}


def _bn_fwd_plan(
    key: tuple,
    input: torch.Tensor,
    weight: Any,
    bias: Any,
    running_mean: Any,
    running_var: Any,
    training: bool,
) -> tuple:
    N, C, S = _bn_shape(input)
    R = N * S
    compute, buf_dtype = compute_types(input.dtype)
    if (running_mean is None) != (running_var is None):
        raise ValueError("running_mean and running_var must either both be None or neither be None")
    if not training and running_mean is None:
        raise RuntimeError("running_mean and running_var must be defined in evaluation mode")
    if training and input.numel() == 0:
        raise RuntimeError(
            f"input tensor must have at least one element, but got input_sizes = "
            f"{list(input.shape)}"
        )
    _bn_check_param(weight, C)
    _bn_check_param(bias, C)
    for p in (running_mean, running_var):
        if p is not None and (p.dim() != 1 or p.shape[0] != C):
            raise RuntimeError(f"running statistics must have {C} elements")
    sdt = stat_dtype(input, (weight, bias, running_mean, running_var))
    on_cuda = input.is_cuda
    save_len = C if (training or on_cuda) else 0
    # CUDA's batch norm keeps the input's strides (empty_like), the CPU's suggests a format
    y_fmt = torch.preserve_format if on_cuda else _like_format(input)
    if C == 0:
        return remember(
            _BN_FWD_PLANS, key,
            (save_len, sdt, y_fmt, None, False, 0, buf_dtype, None, None, None, None),
        )  # fmt: skip
    x_st, copy_x = _ncs_or_copy(input)
    y_st = _ncs(_alloc_like(input, y_fmt))
    ys = y_st if y_st is not None else _ncs(input.contiguous())
    has_running = running_mean is not None
    rm_stride = running_mean.stride(0) if has_running else 1
    rv_stride = running_var.stride(0) if has_running else 1
    training = bool(training)
    if R > 0 and planes_layout(C, x_st[1]):
        p = planes.PlanesPlan(N, C, S, fuse=training)
        flags = dict(
            TRAINING=training, HAS_RUNNING=has_running, HAS_SAVE=save_len > 0,
            HAS_W=weight is not None, HAS_B=bias is not None,
            UNIT_S=planes.unit_s(x_st, ys), IDX=index_type(input.numel(), input.shape, [input.stride()]), COMPUTE=compute,
        )  # fmt: skip
        scratch = 3 * p.split * C if training and not p.fused else 0
        on_planes = (p, (C, N, S, x_st, ys, rm_stride, rv_stride), flags)
        plan = (save_len, sdt, y_fmt, y_st, copy_x, scratch, buf_dtype, None, None, None, on_planes)
        return remember(_BN_FWD_PLANS, key, plan)
    merged, ((xsN, xsC, xsS), (ysN, ysC, ysS)) = rows_strides(S, x_st, ys)
    cv = row_vector(C, (xsN, xsC, xsS), (ysN, ysC, ysS))
    block_r, block_c, n_cblocks, split, rows_per_split, warps = _bn_tiling(C, xsC, R)
    fold = R > 0 and (not training or _fold(split, block_r))
    scratch = 3 * split * C if training else 0
    stats = final = apply = None
    if training:
        stats = (
            (n_cblocks * split,),
            (C, S, R, xsN, xsC, xsS, rows_per_split, n_cblocks, split),
            dict(MERGED=merged, CV=cv, COMPUTE=compute, BLOCK_R=block_r, BLOCK_C=block_c,
                 num_warps=warps),
        )  # fmt: skip
    if not fold and (training or save_len):  # eval with no rows: only the saved stats
        final = (
            (cdiv(C, BN_FINALIZE_BLOCK),),
            (C, split, scratch, rm_stride, rv_stride),
            dict(
                TRAINING=training, HAS_RUNNING=has_running, HAS_SAVE=save_len > 0,
                COMPUTE=compute, BLOCK=BN_FINALIZE_BLOCK,
                BLOCK_S=merge_rows(split, BN_FINALIZE_BLOCK),
            ),
        )  # fmt: skip
        stat_off = scratch
        scratch += 2 * C
    else:
        stat_off = 0
    if R > 0:
        apply = (
            (n_cblocks * cdiv(R, block_r),),
            (C, S, R, xsN, xsC, xsS, ysN, ysC, ysS, n_cblocks, split, stat_off, rm_stride,
             rv_stride),
            dict(
                FOLD=fold, TRAINING=training, HAS_RUNNING=has_running, HAS_SAVE=save_len > 0,
                HAS_W=weight is not None, HAS_B=bias is not None, MERGED=merged, CV=cv,
                COMPUTE=compute, BLOCK_R=block_r, BLOCK_C=block_c,
                BLOCK_S=merge_rows(split, block_c) if fold and training else 1, num_warps=warps,
            ),
        )  # fmt: skip
    plan = (save_len, sdt, y_fmt, y_st, copy_x, scratch, buf_dtype, stats, final, apply, None)
    return remember(_BN_FWD_PLANS, key, plan)


def batch_norm(
    input: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    running_mean: torch.Tensor | None,
    running_var: torch.Tensor | None,
    training: bool,
    momentum: float,
    eps: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """aten::native_batch_norm: (out, save_mean, save_invstd); updates the running
    statistics in place when training (momentum, unbiased variance).

    Training: a statistics launch and an apply launch that merges the partials itself
    (a finalize launch between them only where the merge would cost the apply kernel
    more than 1/BN_FOLD_RATIO of its reads); eval: the apply launch alone."""
    dev = input.device
    key = (
        input.shape, input.stride(), input.dtype, dev, _pkey(weight), _pkey(bias),
        _rkey(running_mean), _rkey(running_var), bool(training), BN_ROW_VECTORS,
    )  # fmt: skip
    plan = _BN_FWD_PLANS.get(key)
    if plan is None:
        plan = _bn_fwd_plan(key, input, weight, bias, running_mean, running_var, training)
    save_len, sdt, y_fmt, y_st, copy_x, scratch, bdt, stats, final, apply, on_planes = plan
    save_mean = torch.empty((save_len,), dtype=sdt, device=dev)
    save_invstd = torch.empty((save_len,), dtype=sdt, device=dev)
    if y_fmt is None:
        y = torch.empty(input.shape, dtype=input.dtype, device=dev)
    else:
        y = torch.empty_like(input, memory_format=y_fmt)
    if apply is None and final is None and on_planes is None:
        return y, save_mean, save_invstd
    x = input.contiguous() if copy_x else input
    work = torch.empty((scratch,), dtype=bdt, device=dev) if scratch else x
    rm = running_mean if running_mean is not None else work
    rv = running_var if running_var is not None else work
    sm, si = (save_mean, save_invstd) if save_len else (work, work)
    eps = float(eps)
    momentum = float(momentum)
    if on_planes is not None:
        y_dst = y if y_st is not None else torch.empty(input.shape, dtype=input.dtype, device=dev)
        p, ints, flags = on_planes
        planes.forward(
            p, x, y_dst, work, rm, rv, sm, si, weight.contiguous() if weight is not None else work,
            bias.contiguous() if bias is not None else work, ints, eps, momentum, flags,
        )  # fmt: skip
        if y_dst is not y:
            y.copy_(y_dst)
        return y, save_mean, save_invstd
    if stats is not None:
        _bn_stats(stats[0], (x, work, *stats[1]), **stats[2])
    if final is not None:
        _bn_finalize(final[0], (work, rm, rv, sm, si, *final[1], eps, momentum), **final[2])
    if apply is not None:
        y_dst = y if y_st is not None else torch.empty(input.shape, dtype=input.dtype, device=dev)
        _bn_apply(
            apply[0],
            (x, y_dst, work, rm, rv, sm, si, weight.contiguous() if weight is not None else work,
             bias.contiguous() if bias is not None else work, *apply[1], eps, momentum),
            **apply[2],
        )  # fmt: skip
        if y_dst is not y:
            y.copy_(y_dst)
    return y, save_mean, save_invstd


# the gate repeats these functions' launches (native_launch.declare_replay)
declare_replay(batch_norm)
