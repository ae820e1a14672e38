"""Batch norm over channel planes: the kernels for inputs whose channels are not adjacent
in memory (NCHW, the layout of every traced batch norm), forward and backward.

Why a layout of its own: the row tiles of :mod:`opbench.kernels._lib.batch_norm` walk
``r = n*S + s`` for one channel and split ``r`` back into ``(n, s)`` per element, an
int64 division per element that no memory-bound kernel can afford. Here a tile is
``[BLOCK_N, BLOCK_S]`` of one channel ``c``, ``n`` down and ``s`` across: offsets are
``c*sC + n*sN + s*sS`` with no division, contiguous along ``s`` (and 16-byte loads where
Triton can prove ``S`` and the strides divisible by 16: they are specialized, keyed by
the launchers). A channel's tiles are numbered ``t = nb * s_blocks + sb``.

Statistics are per-lane sums of ``x - k`` and ``(x - k)^2`` over a program's tiles,
``k`` the mean of its first tile (a shift that keeps the sum of squares from cancelling:
no per-tile reduction, one reduction per program at the end), turned into (count, mean,
M2) partials that merge like Chan's.

Two plans (chosen in the op modules, :class:`PlanesPlan`):

* **fused** (many channels, each small enough to be re-read from L2): one program per
  channel computes the statistics, then normalizes the same tiles: one launch forward
  and one backward, as eager's backward kernel;
* **split** (few channels, or large ones): ``split`` programs per channel write partials,
  and an apply launch of one program per tile merges its channel's partials (one vector
  load each, not a loop) before it normalizes: two launches.
"""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

from opbench.kernels._lib.launch import Launcher, cdiv, jit_unspecialized, next_pow2
from opbench.kernels._lib.norm import _INTERPRETING, inv_sqrt, sum_f, warps_for
from opbench.kernels._lib.proven import common_power_of_two, multiple

__all__ = ["PlanesPlan", "backward", "bn_finish", "bn_running_stats", "forward", "unit_s"]

#: Elements per tile and the widest tile along ``s``. 2048 (8 f16 a thread at 8 warps):
#: on the H100's traced cases (``device_profile.py --set``) the two ops' device geomean
#: against eager was 1.32 / 1.33 at 4096 and 1.50 / 1.69 at 2048 (fewer registers, more
#: resident programs: the loads are scalar wherever S is odd).
BNP_TILE = 2048 if not _INTERPRETING else 65536
BNP_MAX_S = 1024 if not _INTERPRETING else 65536
#: Programs a split statistics pass aims for, and the most partials one channel gets.
BNP_TARGET_PROGRAMS = 1056 if not _INTERPRETING else 1
BNP_MAX_SPLIT = 64
#: The fused plan: at least this many channels (two programs per SM of the H100), each of
#: at most this many elements (its second pass reads the tiles back from L2: 528
#: resident programs of 32 KiB f16 fit the H100's 50 MB).
BNP_FUSE_MIN_CHANNELS = 264 if not _INTERPRETING else 1
BNP_FUSE_MAX_ELEMENTS = 16384 if not _INTERPRETING else 1 << 30

#: Integer arguments left to Triton's specialization (divisible by 16 proves vector loads)
_SPECIALIZED = ("S", "xsN", "xsC", "ysN", "ysC", "gsN", "gsC")


# ----------------------------------------------------------------------------- tiles


@triton.jit
def _bnp_tile(t, s_blocks, N, S, BLOCK_N: tl.constexpr, BLOCK_S: tl.constexpr):
    """(n indices, s indices, mask) of a channel's tile ``t`` (int32: the offsets built
    from them are int32 where the tensors allow, see :func:`_bnp_off`)."""
    nb = t // s_blocks
    sb = t - nb * s_blocks
    ns = nb.to(tl.int32) * BLOCK_N + tl.arange(0, BLOCK_N)
    ss = sb.to(tl.int32) * BLOCK_S + tl.arange(0, BLOCK_S)
    return ns, ss, (ns < N)[:, None] & (ss < S)[None, :]


@triton.jit
def _bnp_tile_count(t, s_blocks, N, S, BLOCK_N: tl.constexpr, BLOCK_S: tl.constexpr):
    """How many elements of tile ``t`` are in bounds (scalar arithmetic, no reduction)."""
    nb = t // s_blocks
    sb = t - nb * s_blocks
    rows = tl.minimum(N - nb * BLOCK_N, BLOCK_N)
    cols = tl.minimum(S - sb * BLOCK_S, BLOCK_S)
    return rows * cols


@triton.jit
def _bnp_off(c, ns, ss, sN, sC, sS, UNIT_S: tl.constexpr, IDX: tl.constexpr):
    """Offsets of channel ``c``'s elements (ns, ss) under strides (sN, sC, sS): the
    channel's base in int64 (a scalar), the per-element part in IDX (int32 where every
    offset fits: half the registers and address arithmetic of int64)."""
    row = ns.to(IDX) * tl.cast(sN, IDX)
    if UNIT_S:
        return c * sC + (row[:, None] + ss.to(IDX)[None, :])
    return c * sC + (row[:, None] + ss.to(IDX)[None, :] * tl.cast(sS, IDX))


@triton.jit
def _bnp_split_range(split, tiles_per_split, n_tiles):
    """(channel, split index, first tile, end tile) of this program of a split pass: the
    programs of channel ``c`` are ``c * split`` to ``c * split + split - 1``."""
    pid = tl.program_id(0).to(tl.int64)
    c = pid // split
    j = pid - c * split
    t0 = j * tiles_per_split
    return c, j, t0, tl.minimum(t0 + tiles_per_split, n_tiles)


@triton.jit
def _bnp_moments(
    ptr, c, t0, t1, s_blocks, N, S, sN, sC, sS, UNIT_S: tl.constexpr, IDX: tl.constexpr,
    COMPUTE: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_S: tl.constexpr,
):  # fmt: skip
    """(count, mean, M2) of channel ``c`` over its tiles [t0, t1): per-lane sums of the
    values shifted by the first tile's mean, reduced once."""
    ns, ss, mask = _bnp_tile(t0, s_blocks, N, S, BLOCK_N, BLOCK_S)
    x = tl.load(ptr + _bnp_off(c, ns, ss, sN, sC, sS, UNIT_S, IDX), mask=mask, other=0.0)
    k = sum_f(sum_f(x.to(COMPUTE), axis=1), axis=0) / tl.maximum(
        sum_f(sum_f(tl.where(mask, 1.0, 0.0).to(COMPUTE), axis=1), axis=0), 1.0
    )
    s1 = tl.full([BLOCK_N, BLOCK_S], 0, COMPUTE)
    s2 = tl.full([BLOCK_N, BLOCK_S], 0, COMPUTE)
    count = t0 * 0
    for t in range(t0, t1):
        ns, ss, mask = _bnp_tile(t, s_blocks, N, S, BLOCK_N, BLOCK_S)
        x = tl.load(ptr + _bnp_off(c, ns, ss, sN, sC, sS, UNIT_S, IDX), mask=mask, other=0.0)
        d = tl.where(mask, x.to(COMPUTE) - k, 0.0)
        s1 += d
        s2 += d * d
        count += _bnp_tile_count(t, s_blocks, N, S, BLOCK_N, BLOCK_S)
    n = count.to(COMPUTE)
    t1s = sum_f(sum_f(s1, axis=1), axis=0)
    t2s = sum_f(sum_f(s2, axis=1), axis=0)
    nn = tl.maximum(n, 1.0)
    return n, k + t1s / nn, tl.maximum(t2s - t1s * t1s / nn, 0.0)


@triton.jit
def _one(v, COMPUTE: tl.constexpr):
    """A scalar as a one-element vector (the per-channel helpers work on vectors)."""
    return tl.full([1], 0, COMPUTE) + v


@triton.jit
def bn_finish(
    count, mean, m2, cs, wmask, rm_ptr, rv_ptr, save_mean_ptr, save_invstd_ptr,
    rm_stride, rv_stride, eps, momentum,
    HAS_RUNNING: tl.constexpr, HAS_SAVE: tl.constexpr, COMPUTE: tl.constexpr,
):  # fmt: skip
    """invstd of channels ``cs`` from their (count, mean, M2); where ``wmask`` (the
    program that owns the channels) the running statistics are updated (momentum,
    unbiased variance: NaN for one value, as eager) and the saved ones written."""
    invstd = inv_sqrt(m2 / tl.maximum(count, 1.0) + tl.cast(eps, COMPUTE))
    if HAS_RUNNING:
        m = tl.cast(momentum, COMPUTE)
        rm = tl.load(rm_ptr + cs * rm_stride, mask=wmask, other=0.0).to(COMPUTE)
        rv = tl.load(rv_ptr + cs * rv_stride, mask=wmask, other=0.0).to(COMPUTE)
        unbiased = tl.where(count > 1.0, m2 / tl.maximum(count - 1.0, 1.0), float("nan"))
        rm = m * mean + (1.0 - m) * rm
        rv = m * unbiased + (1.0 - m) * rv
        tl.store(rm_ptr + cs * rm_stride, rm.to(rm_ptr.dtype.element_ty), mask=wmask)
        tl.store(rv_ptr + cs * rv_stride, rv.to(rv_ptr.dtype.element_ty), mask=wmask)
    if HAS_SAVE:
        tl.store(save_mean_ptr + cs, mean.to(save_mean_ptr.dtype.element_ty), mask=wmask)
        tl.store(save_invstd_ptr + cs, invstd.to(save_invstd_ptr.dtype.element_ty), mask=wmask)
    return invstd


@triton.jit
def bn_running_stats(
    rm_ptr, rv_ptr, save_mean_ptr, save_invstd_ptr, cs, cmask, wmask, rm_stride, rv_stride,
    eps, HAS_SAVE: tl.constexpr, COMPUTE: tl.constexpr,
):  # fmt: skip
    """Eval mode: (mean, invstd) of channels ``cs`` from the running statistics; where
    ``wmask`` they are written as the saved ones (CUDA eager saves them in eval too)."""
    mean = tl.load(rm_ptr + cs * rm_stride, mask=cmask, other=0.0).to(COMPUTE)
    var = tl.load(rv_ptr + cs * rv_stride, mask=cmask, other=0.0).to(COMPUTE)
    invstd = inv_sqrt(var + tl.cast(eps, COMPUTE))
    if HAS_SAVE:
        tl.store(save_mean_ptr + cs, mean.to(save_mean_ptr.dtype.element_ty), mask=wmask)
        tl.store(save_invstd_ptr + cs, invstd.to(save_invstd_ptr.dtype.element_ty), mask=wmask)
    return mean, invstd


# ----------------------------------------------------------------------------- forward


@jit_unspecialized(keep=_SPECIALIZED)
def _bnp_fwd_kernel(
    x_ptr, y_ptr, part_ptr, rm_ptr, rv_ptr, save_mean_ptr, save_invstd_ptr, w_ptr, b_ptr,
    C: tl.int64, N: tl.int64, S: tl.int64, xsN: tl.int64, xsC: tl.int64, xsS: tl.int64,
    ysN: tl.int64, ysC: tl.int64, ysS: tl.int64, s_blocks: tl.int64, n_tiles: tl.int64,
    tiles_per_split: tl.int64, split: tl.int64, rm_stride: tl.int64, rv_stride: tl.int64,
    eps: tl.float64, momentum: tl.float64,
    FUSED: tl.constexpr, HAS_RUNNING: tl.constexpr, HAS_SAVE: tl.constexpr,
    HAS_W: tl.constexpr, HAS_B: tl.constexpr, UNIT_S: tl.constexpr, IDX: tl.constexpr, COMPUTE: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_S: tl.constexpr,
    SV: tl.constexpr,
):  # fmt: skip
    """Training statistics of channel ``c = pid // split`` over its tiles of split
    ``pid % split``: (count, mean, M2) into part[3, split, C]; FUSED (split 1): the
    channel's invstd, running and saved statistics, and y = (x - mean) * invstd * w + b."""
    S, xsN, xsC = multiple(S, SV), multiple(xsN, SV), multiple(xsC, SV)
    ysN, ysC = multiple(ysN, SV), multiple(ysC, SV)
    c, j, t0, t1 = _bnp_split_range(split, tiles_per_split, n_tiles)
    n, mean, m2 = _bnp_moments(
        x_ptr, c, t0, t1, s_blocks, N, S, xsN, xsC, xsS, UNIT_S, IDX, COMPUTE, BLOCK_N, BLOCK_S
    )
    if FUSED:
        cs = c + tl.arange(0, 1)
        ones = cs >= 0
        mean_v = _one(mean, COMPUTE)
        invstd = bn_finish(
            _one(n, COMPUTE), mean_v, _one(m2, COMPUTE), cs, ones, rm_ptr, rv_ptr,
            save_mean_ptr, save_invstd_ptr, rm_stride, rv_stride, eps, momentum,
            HAS_RUNNING, HAS_SAVE, COMPUTE,
        )  # fmt: skip
        _bnp_normalize(
            x_ptr, y_ptr, w_ptr, b_ptr, c, cs, mean_v, invstd, 0, n_tiles, s_blocks, N, S,
            xsN, xsC, xsS, ysN, ysC, ysS, HAS_W, HAS_B, UNIT_S, IDX, COMPUTE, BLOCK_N, BLOCK_S,
        )  # fmt: skip
    else:
        tl.store(part_ptr + j * C + c, n)
        tl.store(part_ptr + (split + j) * C + c, mean)
        tl.store(part_ptr + (2 * split + j) * C + c, m2)


@triton.jit
def _bnp_normalize(
    x_ptr, y_ptr, w_ptr, b_ptr, c, cs, mean, invstd, t0, t1, s_blocks, N, S,
    xsN, xsC, xsS, ysN, ysC, ysS,
    HAS_W: tl.constexpr, HAS_B: tl.constexpr, UNIT_S: tl.constexpr, IDX: tl.constexpr,
    COMPUTE: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_S: tl.constexpr,
):  # fmt: skip
    """y = (x - mean) * invstd * w + b over channel ``c``'s tiles [t0, t1); ``mean`` and
    ``invstd`` are one-element vectors. Not ``x * scale + shift``: for values far from
    zero with a small spread, the two large terms cancel (1e3 +- 1e-2: 4x eager's error)."""
    scale = invstd
    if HAS_W:
        scale = scale * tl.load(w_ptr + cs).to(COMPUTE)
    shift = mean * 0.0
    if HAS_B:
        shift = tl.load(b_ptr + cs).to(COMPUTE)
    mean2 = mean[:, None]
    scale2 = scale[:, None]
    shift2 = shift[:, None]
    for t in range(t0, t1):
        ns, ss, mask = _bnp_tile(t, s_blocks, N, S, BLOCK_N, BLOCK_S)
        x = tl.load(x_ptr + _bnp_off(c, ns, ss, xsN, xsC, xsS, UNIT_S, IDX), mask=mask, other=0.0)
        y = (x.to(COMPUTE) - mean2) * scale2 + shift2
        tl.store(
            y_ptr + _bnp_off(c, ns, ss, ysN, ysC, ysS, UNIT_S, IDX),
            y.to(y_ptr.dtype.element_ty),
            mask=mask,
        )


@triton.jit
def _bnp_merge(part_ptr, c, C, split, COMPUTE: tl.constexpr, SPLIT_P2: tl.constexpr):
    """Channel ``c``'s (count, mean, M2) merged from its ``split`` partials, as vectors of
    one element: N = sum n_j, mean = sum n_j mean_j / N, M2 = sum M2_j + sum n_j (mean_j -
    mean)^2 (Chan's merge of all of them at once)."""
    js = tl.arange(0, SPLIT_P2)
    jm = js < split
    n_j = tl.load(part_ptr + js * C + c, mask=jm, other=0.0)
    mu_j = tl.load(part_ptr + (split + js) * C + c, mask=jm, other=0.0)
    q_j = tl.load(part_ptr + (2 * split + js) * C + c, mask=jm, other=0.0)
    n = sum_f(n_j, axis=0)
    mean = sum_f(n_j * mu_j, axis=0) / tl.maximum(n, 1.0)
    d = tl.where(jm, mu_j - mean, 0.0)
    m2 = sum_f(q_j, axis=0) + sum_f(n_j * d * d, axis=0)
    return _one(n, COMPUTE), _one(mean, COMPUTE), _one(m2, COMPUTE)


@jit_unspecialized(keep=_SPECIALIZED)
def _bnp_apply_kernel(
    x_ptr, y_ptr, part_ptr, rm_ptr, rv_ptr, save_mean_ptr, save_invstd_ptr, w_ptr, b_ptr,
    C: tl.int64, N: tl.int64, S: tl.int64, xsN: tl.int64, xsC: tl.int64, xsS: tl.int64,
    ysN: tl.int64, ysC: tl.int64, ysS: tl.int64, s_blocks: tl.int64, n_tiles: tl.int64,
    split: tl.int64, rm_stride: tl.int64, rv_stride: tl.int64,
    eps: tl.float64, momentum: tl.float64,
    TRAINING: tl.constexpr, HAS_RUNNING: tl.constexpr, HAS_SAVE: tl.constexpr,
    HAS_W: tl.constexpr, HAS_B: tl.constexpr, UNIT_S: tl.constexpr, IDX: tl.constexpr, COMPUTE: tl.constexpr,
    SPLIT_P2: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_S: tl.constexpr,
    SV: tl.constexpr,
):  # fmt: skip
    """One tile ``t = pid % n_tiles`` of channel ``c = pid // n_tiles``: training, its
    channel's partials merged (tile 0 writes the running and saved statistics); eval,
    the running statistics (tile 0 writes the saved ones)."""
    S, xsN, xsC = multiple(S, SV), multiple(xsN, SV), multiple(xsC, SV)
    ysN, ysC = multiple(ysN, SV), multiple(ysC, SV)
    pid = tl.program_id(0).to(tl.int64)
    c = pid // n_tiles
    t = pid - c * n_tiles
    cs = c + tl.arange(0, 1)
    first = (cs * 0 + t) == 0
    if TRAINING:
        # Like batch_norm._bn_channel_stats, kept apart: one channel's partials, merged by
        # _bnp_merge; that one merges a block of channels, BLOCK_S splits a step
        n, mean, m2 = _bnp_merge(part_ptr, c, C, split, COMPUTE, SPLIT_P2)
        invstd = bn_finish(
            n, mean, m2, cs, first, rm_ptr, rv_ptr, save_mean_ptr, save_invstd_ptr,
            rm_stride, rv_stride, eps, momentum, HAS_RUNNING, HAS_SAVE, COMPUTE,
        )  # fmt: skip
    else:
        mean, invstd = bn_running_stats(
            rm_ptr, rv_ptr, save_mean_ptr, save_invstd_ptr, cs, cs >= 0, first, rm_stride,
            rv_stride, eps, HAS_SAVE, COMPUTE,
        )  # fmt: skip
    _bnp_normalize(
        x_ptr, y_ptr, w_ptr, b_ptr, c, cs, mean, invstd, t, t + 1, s_blocks, N, S,
        xsN, xsC, xsS, ysN, ysC, ysS, HAS_W, HAS_B, UNIT_S, IDX, COMPUTE, BLOCK_N, BLOCK_S,
    )  # fmt: skip


# ----------------------------------------------------------------------------- backward


@triton.jit
def _bnp_grad_sums(
    g_ptr, x_ptr, c, mean, t0, t1, s_blocks, N, S, gsN, gsC, gsS, xsN, xsC, xsS,
    UNIT_S: tl.constexpr, IDX: tl.constexpr, COMPUTE: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_S: tl.constexpr,
):  # fmt: skip
    """(sum(dy), sum(dy * (x - mean))) of channel ``c`` over its tiles [t0, t1)."""
    a = tl.full([BLOCK_N, BLOCK_S], 0, COMPUTE)
    b = tl.full([BLOCK_N, BLOCK_S], 0, COMPUTE)
    for t in range(t0, t1):
        ns, ss, mask = _bnp_tile(t, s_blocks, N, S, BLOCK_N, BLOCK_S)
        dy = tl.load(g_ptr + _bnp_off(c, ns, ss, gsN, gsC, gsS, UNIT_S, IDX), mask=mask, other=0.0)
        x = tl.load(x_ptr + _bnp_off(c, ns, ss, xsN, xsC, xsS, UNIT_S, IDX), mask=mask, other=0.0)
        dy = dy.to(COMPUTE)
        a += dy
        b += tl.where(mask, dy * (x.to(COMPUTE) - mean), 0.0)
    return sum_f(sum_f(a, axis=1), axis=0), sum_f(sum_f(b, axis=1), axis=0)


@triton.jit
def _bnp_grad_input(
    g_ptr, x_ptr, dx_ptr, c, mean, scale, k, mdy, t0, t1, s_blocks, N, S,
    gsN, gsC, gsS, xsN, xsC, xsS, osN, osC, osS,
    TRAINING: tl.constexpr, UNIT_S: tl.constexpr, IDX: tl.constexpr, COMPUTE: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_S: tl.constexpr,
):  # fmt: skip
    """grad_input over channel ``c``'s tiles [t0, t1): training, (dy - mdy - (x - mean) *
    k) * scale; eval, dy * scale (scalars of the channel)."""
    for t in range(t0, t1):
        ns, ss, mask = _bnp_tile(t, s_blocks, N, S, BLOCK_N, BLOCK_S)
        dy = tl.load(g_ptr + _bnp_off(c, ns, ss, gsN, gsC, gsS, UNIT_S, IDX), mask=mask, other=0.0)
        dy = dy.to(COMPUTE)
        if TRAINING:
            x = tl.load(
                x_ptr + _bnp_off(c, ns, ss, xsN, xsC, xsS, UNIT_S, IDX), mask=mask, other=0.0
            )
            dx = (dy - mdy - (x.to(COMPUTE) - mean) * k) * scale
        else:
            dx = dy * scale
        tl.store(
            dx_ptr + _bnp_off(c, ns, ss, osN, osC, osS, UNIT_S, IDX),
            dx.to(dx_ptr.dtype.element_ty),
            mask=mask,
        )


@triton.jit
def _bnp_channel(mean_ptr, inv_ptr, w_ptr, c, mean_stride, inv_stride, eps,
                 RUNNING: tl.constexpr, HAS_W: tl.constexpr, COMPUTE: tl.constexpr):  # fmt: skip
    """(mean, invstd, invstd * w) of channel ``c``: saved statistics, or (RUNNING) the
    running ones."""
    mean = tl.load(mean_ptr + c * mean_stride).to(COMPUTE)
    invstd = tl.load(inv_ptr + c * inv_stride).to(COMPUTE)
    if RUNNING:
        invstd = inv_sqrt(invstd + tl.cast(eps, COMPUTE))
    scale = invstd
    if HAS_W:
        scale = scale * tl.load(w_ptr + c).to(COMPUTE)
    return mean, invstd, scale


@jit_unspecialized(keep=_SPECIALIZED)
def _bnp_bwd_kernel(
    g_ptr, x_ptr, mean_ptr, inv_ptr, w_ptr, part_ptr, dx_ptr, dw_ptr, db_ptr,
    C: tl.int64, N: tl.int64, S: tl.int64, gsN: tl.int64, gsC: tl.int64, gsS: tl.int64,
    xsN: tl.int64, xsC: tl.int64, xsS: tl.int64, ysN: tl.int64, ysC: tl.int64, ysS: tl.int64,
    s_blocks: tl.int64, n_tiles: tl.int64, tiles_per_split: tl.int64, split: tl.int64,
    mean_stride: tl.int64, inv_stride: tl.int64, eps: tl.float64,
    FUSED: tl.constexpr, TRAINING: tl.constexpr, RUNNING: tl.constexpr, HAS_W: tl.constexpr,
    DX: tl.constexpr, DW: tl.constexpr, DB: tl.constexpr, UNIT_S: tl.constexpr,
    IDX: tl.constexpr, COMPUTE: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_S: tl.constexpr,
    SV: tl.constexpr,
):  # fmt: skip
    """Channel ``c = pid // split``'s gradient sums over its tiles of split ``pid %
    split`` into part[2, split, C]; FUSED (split 1): grad_weight, grad_bias and then
    grad_input (``ys*`` are its strides) of the whole channel."""
    S, gsN, gsC = multiple(S, SV), multiple(gsN, SV), multiple(gsC, SV)
    xsN, xsC, ysN = multiple(xsN, SV), multiple(xsC, SV), multiple(ysN, SV)
    ysC = multiple(ysC, SV)
    c, j, t0, t1 = _bnp_split_range(split, tiles_per_split, n_tiles)
    mean, invstd, scale = _bnp_channel(
        mean_ptr, inv_ptr, w_ptr, c, mean_stride, inv_stride, eps, RUNNING, HAS_W, COMPUTE
    )
    s_dy, s_dyx = _bnp_grad_sums(
        g_ptr, x_ptr, c, mean, t0, t1, s_blocks, N, S, gsN, gsC, gsS, xsN, xsC, xsS,
        UNIT_S, IDX, COMPUTE, BLOCK_N, BLOCK_S,
    )  # fmt: skip
    if FUSED:
        if DW:
            tl.store(dw_ptr + c, (s_dyx * invstd).to(dw_ptr.dtype.element_ty))
        if DB:
            tl.store(db_ptr + c, s_dy.to(db_ptr.dtype.element_ty))
        if DX:
            count = (N * S).to(COMPUTE)
            _bnp_grad_input(
                g_ptr, x_ptr, dx_ptr, c, mean, scale, s_dyx / count * invstd * invstd,
                s_dy / count, 0, n_tiles, s_blocks, N, S, gsN, gsC, gsS, xsN, xsC, xsS,
                ysN, ysC, ysS, TRAINING, UNIT_S, IDX, COMPUTE, BLOCK_N, BLOCK_S,
            )  # fmt: skip
    else:
        tl.store(part_ptr + j * C + c, s_dy)
        tl.store(part_ptr + (split + j) * C + c, s_dyx)


@jit_unspecialized(keep=_SPECIALIZED)
def _bnp_bwd_apply_kernel(
    g_ptr, x_ptr, mean_ptr, inv_ptr, w_ptr, part_ptr, dx_ptr, dw_ptr, db_ptr,
    C: tl.int64, N: tl.int64, S: tl.int64, gsN: tl.int64, gsC: tl.int64, gsS: tl.int64,
    xsN: tl.int64, xsC: tl.int64, xsS: tl.int64, ysN: tl.int64, ysC: tl.int64, ysS: tl.int64,
    s_blocks: tl.int64, n_tiles: tl.int64, split: tl.int64,
    mean_stride: tl.int64, inv_stride: tl.int64, eps: tl.float64,
    SUMS: tl.constexpr, TRAINING: tl.constexpr, RUNNING: tl.constexpr, HAS_W: tl.constexpr,
    DX: tl.constexpr, DW: tl.constexpr, DB: tl.constexpr, UNIT_S: tl.constexpr,
    IDX: tl.constexpr, COMPUTE: tl.constexpr, SPLIT_P2: tl.constexpr, BLOCK_N: tl.constexpr,
    BLOCK_S: tl.constexpr,
    SV: tl.constexpr,
):  # fmt: skip
    """grad_input (DX) of one tile ``t = pid % n_tiles`` of channel ``c = pid //
    n_tiles``; SUMS: the channel's partial sums merged first (one vector load each), tile
    0 writing grad_weight and grad_bias."""
    S, gsN, gsC = multiple(S, SV), multiple(gsN, SV), multiple(gsC, SV)
    xsN, xsC, ysN = multiple(xsN, SV), multiple(xsC, SV), multiple(ysN, SV)
    ysC = multiple(ysC, SV)
    pid = tl.program_id(0).to(tl.int64)
    c = pid // n_tiles
    t = pid - c * n_tiles
    mean, invstd, scale = _bnp_channel(
        mean_ptr, inv_ptr, w_ptr, c, mean_stride, inv_stride, eps, RUNNING, HAS_W, COMPUTE
    )
    k = invstd * 0.0
    mdy = invstd * 0.0
    if SUMS:
        js = tl.arange(0, SPLIT_P2)
        jm = js < split
        s_dy = sum_f(tl.load(part_ptr + js * C + c, mask=jm, other=0.0), axis=0)
        s_dyx = sum_f(tl.load(part_ptr + (split + js) * C + c, mask=jm, other=0.0), axis=0)
        if DW:
            if t == 0:
                tl.store(dw_ptr + c, (s_dyx * invstd).to(dw_ptr.dtype.element_ty))
        if DB:
            if t == 0:
                tl.store(db_ptr + c, s_dy.to(db_ptr.dtype.element_ty))
        count = (N * S).to(COMPUTE)
        k = s_dyx / count * invstd * invstd
        mdy = s_dy / count
    if DX:
        _bnp_grad_input(
            g_ptr, x_ptr, dx_ptr, c, mean, scale, k, mdy, t, t + 1, s_blocks, N, S, gsN, gsC,
            gsS, xsN, xsC, xsS, ysN, ysC, ysS, TRAINING, UNIT_S, IDX, COMPUTE, BLOCK_N, BLOCK_S,
        )  # fmt: skip


_fwd = Launcher(_bnp_fwd_kernel, specialize=("S", "xsN", "xsC", "ysN", "ysC"))
_apply = Launcher(_bnp_apply_kernel, specialize=("S", "xsN", "xsC", "ysN", "ysC"))
_bwd = Launcher(_bnp_bwd_kernel, specialize=_SPECIALIZED)
_bwd_apply = Launcher(_bnp_bwd_apply_kernel, specialize=_SPECIALIZED)


# ----------------------------------------------------------------------------- plans


class PlanesPlan:
    """The tiling of one [N, C, S] planes problem: blocks, tiles per channel, split, and
    whether one program per channel does all of it (``fused``)."""

    __slots__ = ("block_n", "block_s", "s_blocks", "n_tiles", "split", "tiles_per_split",
                 "fused", "warps", "split_p2")  # fmt: skip

    def __init__(self, N: int, C: int, S: int, fuse: bool) -> None:
        self.block_s = min(next_pow2(max(S, 1)), BNP_MAX_S)
        self.block_n = max(1, min(next_pow2(max(N, 1)), BNP_TILE // self.block_s))
        self.s_blocks = cdiv(max(S, 1), self.block_s)
        self.n_tiles = cdiv(max(N, 1), self.block_n) * self.s_blocks
        per_channel = self.n_tiles * self.block_n * self.block_s
        self.fused = fuse and C >= BNP_FUSE_MIN_CHANNELS and per_channel <= BNP_FUSE_MAX_ELEMENTS
        if self.fused:
            split = 1
        else:
            split = min(self.n_tiles, max(1, BNP_TARGET_PROGRAMS // max(C, 1)), BNP_MAX_SPLIT)
        self.tiles_per_split = cdiv(self.n_tiles, split)
        self.split = cdiv(self.n_tiles, self.tiles_per_split)
        self.split_p2 = next_pow2(self.split)
        self.warps = warps_for(self.block_n * self.block_s)


def plane_runs(S: int, *strides: tuple[int, int, int]) -> int:
    """``SV`` of the planes kernels: the largest of 8, 4, 2 and 1 dividing ``S`` and every
    tensor's ``n`` and ``c`` strides, where every ``s`` stride is 1 (else 1): runs of that
    many positions start aligned and end together, so they load and store as vectors once
    the kernels restate those values with it (``proven.multiple``): 14x14 planes (196
    positions, which Triton's specialization proves no divisor of but 16) loaded and
    stored 2 bytes at a time without it (sm_90 PTX, ``kernel_ptx.py``)."""
    if not unit_s(*strides):
        return 1
    return common_power_of_two(S, *(v for st in strides for v in st[:2]))


def unit_s(*strides: tuple[int, int, int]) -> bool:
    """Whether every tensor's ``s`` stride is 1 (offsets then add ``s`` itself, which
    Triton sees as contiguous)."""
    return all(st[2] == 1 for st in strides)


def forward(
    p: PlanesPlan, x: Any, y: Any, work: Any, rm: Any, rv: Any, sm: Any, si: Any, w: Any,
    b: Any, ints: tuple, eps: float, momentum: float, flags: dict[str, Any],
) -> None:  # fmt: skip
    """The forward's launches: ``ints`` = (C, N, S, x strides, y strides, rm_stride,
    rv_stride); ``flags``: TRAINING, HAS_RUNNING, HAS_SAVE, HAS_W, HAS_B, UNIT_S, IDX, COMPUTE."""
    C, N, S, xs, ys, rm_st, rv_st = ints
    geo = (C, N, S, *xs, *ys, p.s_blocks, p.n_tiles)
    common = dict(
        HAS_RUNNING=flags["HAS_RUNNING"], HAS_SAVE=flags["HAS_SAVE"], HAS_W=flags["HAS_W"],
        HAS_B=flags["HAS_B"], UNIT_S=flags["UNIT_S"], IDX=flags["IDX"], COMPUTE=flags["COMPUTE"],
        SV=plane_runs(S, xs, ys),
    )  # fmt: skip
    ptrs = (x, y, work, rm, rv, sm, si, w, b)
    if flags["TRAINING"]:
        _fwd(
            (C * p.split,),
            (*ptrs, *geo, p.tiles_per_split, p.split, rm_st, rv_st, eps, momentum),
            FUSED=p.fused, **common, BLOCK_N=p.block_n, BLOCK_S=p.block_s, num_warps=p.warps,
        )  # fmt: skip
        if p.fused:
            return
    _apply(
        (C * p.n_tiles,),
        (*ptrs, *geo, p.split, rm_st, rv_st, eps, momentum),
        TRAINING=flags["TRAINING"], **common, SPLIT_P2=p.split_p2, BLOCK_N=p.block_n,
        BLOCK_S=p.block_s, num_warps=p.warps,
    )  # fmt: skip


def backward(
    p: PlanesPlan, g: Any, x: Any, mean: Any, inv: Any, w: Any, work: Any, dx: Any,
    dw: Any, db: Any, ints: tuple, eps: float, flags: dict[str, Any],
) -> None:  # fmt: skip
    """The backward's launches: ``ints`` = (C, N, S, g strides, x strides, dx strides,
    mean_stride, inv_stride); ``flags``: TRAINING, RUNNING, HAS_W, DX, DW, DB, UNIT_S, IDX,
    COMPUTE. Sums are needed when training with grad_input, or for grad_weight/bias."""
    C, N, S, gs, xs, ds, m_st, i_st = ints
    geo = (C, N, S, *gs, *xs, *ds, p.s_blocks, p.n_tiles)
    ptrs = (g, x, mean, inv, w, work, dx, dw, db)
    common = dict(
        TRAINING=flags["TRAINING"], RUNNING=flags["RUNNING"], HAS_W=flags["HAS_W"],
        SV=plane_runs(S, gs, xs, ds),
    )  # fmt: skip
    sums = flags["DW"] or flags["DB"] or (flags["DX"] and flags["TRAINING"])
    if sums:
        _bwd(
            (C * p.split,),
            (*ptrs, *geo, p.tiles_per_split, p.split, m_st, i_st, eps),
            FUSED=p.fused, **common, DX=flags["DX"], DW=flags["DW"], DB=flags["DB"],
            UNIT_S=flags["UNIT_S"], IDX=flags["IDX"], COMPUTE=flags["COMPUTE"], BLOCK_N=p.block_n,
            BLOCK_S=p.block_s, num_warps=p.warps,
        )  # fmt: skip
        if p.fused:
            return
    if flags["DX"] or sums:
        _bwd_apply(
            (C * p.n_tiles,),
            (*ptrs, *geo, p.split, m_st, i_st, eps),
            SUMS=sums, **common, DX=flags["DX"], DW=flags["DW"], DB=flags["DB"],
            UNIT_S=flags["UNIT_S"],
            IDX=flags["IDX"],
            COMPUTE=flags["COMPUTE"], SPLIT_P2=p.split_p2, BLOCK_N=p.block_n,
            BLOCK_S=p.block_s, num_warps=p.warps,
        )  # fmt: skip
