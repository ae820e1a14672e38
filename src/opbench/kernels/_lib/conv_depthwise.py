"""Depthwise convolution as a direct (non-GEMM) Triton kernel: forward and transposed,
hence the input gradient of a depthwise convolution too. :mod:`opbench.kernels._lib.conv`
routes here the convolutions whose output channels each read one input channel
(``groups == C_in``, any channel multiplier) or whose input channels each feed one output
channel (their input gradients, transposed); the rest stay on the implicit GEMM of
:mod:`opbench.kernels._lib.conv_kernels`.

Why a kernel of its own: the implicit GEMM pads a group's one input channel to
``tl.dot``'s 16 on the reduction side and its one output channel to 16 on the other, so
255 of every 256 products it computes are zeros (the traced ``[32, 728, 19, 19]`` 3x3
depthwise convolution of Xception was one of the part-2 run's slowest). Here each program
computes a ``[BLOCK_C, BLOCK_P]`` tile (channels x flattened output positions, NCHW) or
``[BLOCK_P, BLOCK_C]`` (channels-last: the channels contiguous, so a thread's loads are
16-byte vectors where the strides allow) and adds its ``KD x KH x KW`` taps in fp32, the
taps unrolled (constexpr kernel sizes), each a masked gather of the input at the shifted
positions and one weight vector a tap. Per tap a tile element costs one add, one AND and
one FMA beside its load; its neighbours' taps hit L1.

Where it stands, and why: on an H200 the NCHW 3x3 rows run at 2.5-3x cuDNN's time
(held-out ``[32, 728, 19, 19]``: 59 us unrolled against 19.7; 2026-11-29,
``benchmarks/results/dw-unroll-h200-2026-11-29.md``), and no setting closes it: tiles of 8
channels, 512 positions or 2 warps were slower, and without any bounds (the padded planes)
the kernel alone still took 46.5 us. Each tap re-reads its input from L1 as 2-byte loads
(an odd plane width leaves no aligned vector), so every output costs a load a tap, where
cuDNN stages a tile with its halo in shared memory and reuses it across the taps. Triton
gives no handle on that reuse here (no slices or shifts of a register tile); a kernel
that wants it needs shared memory of its own (CUDA, or a Triton with explicit shared
memory). The 5x5 and 7x7 rows, on zero-padded planes, run at 0.8-1.9x eager. Since
2026-12-01 the NCHW 3x3 calls of no channel multiplier (unit stride or 2; the unit-stride
input gradient) walk their planes in :mod:`~opbench.kernels._lib.conv_depthwise_rows`
instead, where that held registers for the reuse this kernel lacks (36 us on that row).

Only triton.language builtins inside the kernels (``tl.full``, no ``tl.zeros``):
``conv_kernels``' docstring says why.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import torch
import triton
import triton.language as tl

from opbench.kernels._lib import conv_depthwise_rows
from opbench.kernels._lib.conv_depthwise_cl_rows import cl_rows_plan, cl_rows_settings
from opbench.kernels._lib.conv_depthwise_rows import rows_plan, rows_settings
from opbench.kernels._lib.conv_kernels import _idx, _unflatten
from opbench.kernels._lib.conv_nhwc import _span
from opbench.kernels._lib.launch import Launcher, cdiv, jit_unspecialized, next_pow2

__all__ = [
    "DW_PADDED", "DW_PAD_MAX_GROWTH", "DW_PAD_MIN_TAPS", "SPECIALIZED", "_depthwise",
    "DepthwisePlan", "depthwise_plan", "no_bounds_pads", "padded_planes", "prepared_weight",
    "taps_major",
]  # fmt: skip

#: Integers Triton specializes (``== 1``, divisible by 16): the output channel count
#: (the channel mask's constancy) and every input and output stride, so a channels-last
#: tile knows its channels contiguous (stride 1, a constant) and each position's row
#: 16-byte aligned, which is what lets it load and store 8 f16 channels at once.
SPECIALIZED = (
    "C_OUT", "xs0", "xs1", "xs2", "xs3", "xs4", "ws0", "ws1", "wst",
    "ys0", "ys1", "ys2", "ys3", "ys4",
)  # fmt: skip


@triton.jit
def _sidx(v, BIG: tl.constexpr):
    """:func:`~opbench.kernels._lib.conv_kernels._idx` of a specialized integer, which
    arrives as a Python ``1`` where it equals 1 (``.to`` would fail on it)."""
    if BIG:
        t = tl.cast(v, tl.int64)
    else:
        t = tl.cast(v, tl.int32)
    return t


@triton.jit
def _sidx5(s0, s1, s2, s3, s4, BIG: tl.constexpr):
    """:func:`_sidx` of a 5-D tensor's strides."""
    return _sidx(s0, BIG), _sidx(s1, BIG), _sidx(s2, BIG), _sidx(s3, BIG), _sidx(s4, BIG)


@triton.jit
def _outer(c_part, p_part, CHANNELS_INNER: tl.constexpr):
    """``c_part[c] + p_part[p]`` as the kernel's tile: ``[BLOCK_P, BLOCK_C]`` where
    channels are innermost (channels-last), else ``[BLOCK_C, BLOCK_P]``."""
    if CHANNELS_INNER:
        t = p_part[:, None] + c_part[None, :]
    else:
        t = c_part[:, None] + p_part[None, :]
    return t


@triton.jit
def _both(c_ok, p_ok, CHANNELS_INNER: tl.constexpr):
    """``c_ok[c] & p_ok[p]`` as the kernel's tile (see :func:`_outer`)."""
    if CHANNELS_INNER:
        t = p_ok[:, None] & c_ok[None, :]
    else:
        t = c_ok[:, None] & p_ok[None, :]
    return t


@triton.jit
def _per_channel(v, CHANNELS_INNER: tl.constexpr):
    """A per-channel vector broadcast along the tile's positions."""
    if CHANNELS_INNER:
        t = v[None, :]
    else:
        t = v[:, None]
    return t


@triton.jit
def _per_position(v, CHANNELS_INNER: tl.constexpr):
    """A per-position vector broadcast along the tile's channels."""
    if CHANNELS_INNER:
        t = v[:, None]
    else:
        t = v[None, :]
    return t


@jit_unspecialized(keep=SPECIALIZED)
def _depthwise_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr,
    M: tl.int64, C_OUT: tl.int64,
    D: tl.int64, H: tl.int64, W: tl.int64, OD: tl.int64, OH: tl.int64, OW: tl.int64,
    pd: tl.int64, ph: tl.int64, pw: tl.int64,
    xs0: tl.int64, xs1: tl.int64, xs2: tl.int64, xs3: tl.int64, xs4: tl.int64,
    ws0: tl.int64, ws1: tl.int64, wst: tl.int64,
    ys0: tl.int64, ys1: tl.int64, ys2: tl.int64, ys3: tl.int64, ys4: tl.int64,
    CIN_G: tl.constexpr, COUT_G: tl.constexpr,
    KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr,
    SD: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
    DD: tl.constexpr, DH: tl.constexpr, DW: tl.constexpr,
    TRANSPOSED: tl.constexpr, SGN: tl.constexpr, UNIFORM: tl.constexpr,
    HAS_D: tl.constexpr, HAS_BIAS: tl.constexpr, BIG: tl.constexpr,
    CHANNELS_INNER: tl.constexpr, NO_BOUNDS: tl.constexpr, W_TILE: tl.constexpr,
    BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr, KH_UNROLL: tl.constexpr,
):  # fmt: skip
    """``y[m, co] = sum over j < CIN_G and kernel positions k of x[m moved by k,
    g*CIN_G + j] * w(co, j, k)`` with ``g = co // COUT_G`` (a group's ``CIN_G`` input and
    ``COUT_G`` output channels, one of them 1 where :mod:`conv` routes here), ``w`` the
    weight ``[C_out, CIN_G, k...]`` or, transposed, ``[C_in, COUT_G, k...]`` (``ws0``,
    ``ws1``: its channel strides), its taps ``wst`` apart: dense (1) over NCHW, so a
    row's taps are immediate offsets; tap-major over channels-last (``conv`` passes the
    ``[k..., C, j]`` copy of :func:`taps_major`), so a tap's weights are contiguous. Read
    as a ``[BLOCK_C]`` vector (``W_TILE`` off), Triton loads one weight a thread and moves
    it into the tile's layout through shared memory between two barriers, every tap
    (sm_90 SASS: 16 ``BAR.SYNC`` in the 7x7 row loop); ``W_TILE`` reads them as a whole
    ``[BLOCK_P, BLOCK_C]`` tile in the tile's layout (no barrier, a load an element),
    which timed slower on the H200 (``conv.DW_WEIGHT_TILE_CL``).

    Grid: (position tiles over ``M = N x output volume``, channel tiles). Forward: input
    position ``o * stride - pad + k * dilation``; transposed: ``(o + pad - k * dilation) /
    stride`` where exact. Where a tap moves every position by the same input offset (any
    forward, a transposed one of unit strides) the tile's pointers are formed once and a
    tap adds a scalar (a constant where the dilation and the stride it scales are: the
    load's immediate offset); a strided transposed tap divides per position. ``SGN``: 1
    forward, -1 transposed; ``UNIFORM``: forward, or transposed with unit strides (both
    set by the launcher, Triton 3.6's frontend being less sure of in-kernel constexprs). Bounds are
    per position and tap; a channel's weight is one ``[BLOCK_C]`` load a tap.

    ``NO_BOUNDS`` (NCHW, uniform taps, the input zero-padded by :func:`padded_planes` so
    every tap of every position lands inside it): no bounds at all, the positions past
    ``M`` clamped to the last one (their loads read it; only the store is masked), so a
    tap is one unmasked load at an immediate offset, a conversion and an FMA."""
    pid_p = tl.program_id(0)
    pid_c = tl.program_id(1)
    M, C_OUT = _idx(M, BIG), _sidx(C_OUT, BIG)
    D, H, W = _idx(D, BIG), _idx(H, BIG), _idx(W, BIG)
    OD, OH, OW = _idx(OD, BIG), _idx(OH, BIG), _idx(OW, BIG)
    xs0, xs1, xs2, xs3, xs4 = _sidx5(xs0, xs1, xs2, xs3, xs4, BIG)
    ws0, ws1, wst = _sidx(ws0, BIG), _sidx(ws1, BIG), _sidx(wst, BIG)
    ys0, ys1, ys2, ys3, ys4 = _sidx5(ys0, ys1, ys2, ys3, ys4, BIG)
    rp = _idx(pid_p, BIG) * BLOCK_P + tl.arange(0, BLOCK_P)
    co = _idx(pid_c, BIG) * BLOCK_C + tl.arange(0, BLOCK_C)
    p_ok = rp < M
    c_ok = co < C_OUT
    if NO_BOUNDS:
        nb, od, oh, ow = _unflatten(tl.minimum(rp, M - 1), OD, OH, OW)
    else:
        nb, od, oh, ow = _unflatten(rp, OD, OH, OW)
    # a tile's channels past C_OUT read the last one's weights (and over NCHW its input):
    # their loads need no channel mask, only the store does. Channels-last loads keep the
    # mask instead, which the specialized C_OUT proves constant over 16 channels (a
    # clamped index would hide their contiguity), and so do their weight loads
    if CHANNELS_INNER:
        cw = co
    else:
        cw = tl.minimum(co, C_OUT - 1)
    gw = cw // COUT_G  # a constant divisor (1 for depthwise forward and input gradients)
    g = gw
    if TRANSPOSED:  # the numerator o + pad - k * dilation, divided by the stride
        bd, bh, bw = od + _idx(pd, BIG), oh + _idx(ph, BIG), ow + _idx(pw, BIG)
    else:
        bd, bh, bw = od * SD - _idx(pd, BIG), oh * SH - _idx(ph, BIG), ow * SW - _idx(pw, BIG)
    x_pos = nb * xs0
    if UNIFORM:  # the input position of the kernel's first tap
        x_pos += bh * xs3 + bw * xs4
        if HAS_D:
            x_pos += bd * xs2
    xp = x_ptr + _outer((g * CIN_G) * xs1, x_pos, CHANNELS_INNER)
    if TRANSPOSED:  # weight [C_in, COUT_G, k...]: row g*CIN_G + j, column co % COUT_G
        w_chan = (gw * CIN_G) * ws0 + (cw - gw * COUT_G) * ws1
        w_step = ws0
    else:  # weight [C_out, CIN_G, k...]
        w_chan = cw * ws0
        w_step = ws1
    if CHANNELS_INNER:
        acc = tl.full([BLOCK_P, BLOCK_C], 0, tl.float32)
    else:
        acc = tl.full([BLOCK_C, BLOCK_P], 0, tl.float32)
    if CHANNELS_INNER and W_TILE:  # a tap's weights as a whole tile (each row the same)
        w_tile = tl.broadcast_to(w_ptr + w_chan[None, :], [BLOCK_P, BLOCK_C])
        c_tile = tl.broadcast_to(c_ok[None, :], [BLOCK_P, BLOCK_C])
    for _j in range(CIN_G):  # the group's input channels (xp, w_chan step)
        for kd in range(KD):  # loops: unrolled, every tap's pointers were live at once
            i_d = bd + (SGN * kd * DD)
            d_ok = p_ok
            if HAS_D:
                if not UNIFORM and SD != 1:
                    d_ok = d_ok & (i_d % SD == 0)
                    i_d = tl.where(d_ok, i_d, 0) // SD
                d_ok = d_ok & (i_d >= 0) & (i_d < D)
            # kernel rows unrolled by KH_UNROLL (KH: every row's loads issued before the
            # first FMA; 1: a loop, each row a round trip to memory). Unrolled, a 7x7
            # channels-last tile took 32 registers more and 5.9 KB of stack
            for kh in tl.range(KH, loop_unroll_factor=KH_UNROLL):
                # the row's pointers once a row: the taps along it add constants where
                # the input's last stride is 1 (NCHW), folded into the loads' addresses
                if HAS_D:
                    row = xp + ((SGN * kd * DD) * xs2 + (SGN * kh * DH) * xs3)
                else:
                    row = xp + (SGN * kh * DH) * xs3
                # Like the iw columns below, kept apart: the H axis, one row for the KW columns
                ih = bh + (SGN * kh * DH)
                h_ok = d_ok
                if not UNIFORM and SH != 1:
                    h_ok = h_ok & (ih % SH == 0)
                    ih = tl.where(h_ok, ih, 0) // SH
                if not NO_BOUNDS:
                    h_ok = h_ok & (ih >= 0) & (ih < H)
                for kw in tl.static_range(KW):
                    # Like the ih rows above, kept apart: the W axis, inside the static loop over KW
                    iw = bw + (SGN * kw * DW)
                    ok = h_ok
                    if not UNIFORM and SW != 1:
                        ok = ok & (iw % SW == 0)
                        iw = tl.where(ok, iw, 0) // SW
                    if not NO_BOUNDS:
                        ok = ok & (iw >= 0) & (iw < W)
                    if UNIFORM:  # one scalar for the whole tile
                        ptrs = row + (SGN * kw * DW) * xs4
                    else:
                        pos = ih * xs3 + iw * xs4
                        if HAS_D:
                            pos += i_d * xs2
                        ptrs = xp + _per_position(pos, CHANNELS_INNER)
                    if CHANNELS_INNER:
                        xt = tl.load(ptrs, mask=_both(c_ok, ok, CHANNELS_INNER), other=0.0)
                    elif NO_BOUNDS:
                        xt = tl.load(ptrs)
                    else:
                        xt = tl.load(ptrs, mask=_per_position(ok, CHANNELS_INNER), other=0.0)
                    # NCHW: the taps dense (wst 1; conv.py sees to it), kw an immediate
                    # offset; channels-last: tap-major, a tap's channels contiguous
                    tap = (kd * KH + kh) * KW + kw
                    if CHANNELS_INNER and W_TILE:
                        wt = tl.load(w_tile + tap * wst, mask=c_tile, other=0.0)
                    elif CHANNELS_INNER:
                        wt = tl.load(w_ptr + w_chan + tap * wst, mask=c_ok, other=0.0)
                    else:
                        wt = tl.load(w_ptr + w_chan + tap * wst)
                    wt = wt.to(tl.float32)
                    if CHANNELS_INNER and W_TILE:
                        acc += xt.to(tl.float32) * wt
                    else:
                        acc += xt.to(tl.float32) * _per_channel(wt, CHANNELS_INNER)
        xp += xs1
        w_chan += w_step
        if CHANNELS_INNER and W_TILE:
            w_tile += w_step
    if HAS_BIAS:
        bias = tl.load(b_ptr + co, mask=c_ok, other=0.0).to(tl.float32)
        acc += _per_channel(bias, CHANNELS_INNER)
    y_pos = nb * ys0 + oh * ys3 + ow * ys4
    if HAS_D:
        y_pos += od * ys2
    tl.store(y_ptr + _outer(co * ys1, y_pos, CHANNELS_INNER), acc.to(y_ptr.dtype.element_ty),
             mask=_both(c_ok, p_ok, CHANNELS_INNER))  # fmt: skip


_depthwise = Launcher(_depthwise_kernel, specialize=SPECIALIZED)


def taps_major(w5: torch.Tensor) -> torch.Tensor:
    """A ``[A, B, KD, KH, KW]`` weight as the dense ``[KD, KH, KW, A, B]`` copy the
    channels-last kernel reads (a small copy: ``A x B x taps`` elements; its (A, B, tap)
    strides, ``B``, 1 and ``A x B``, are :func:`depthwise_plan`'s ``ws0``, ``ws1``, ``wst``)."""
    return w5.permute(2, 3, 4, 0, 1).contiguous()


@jit_unspecialized
def _pad_kernel(
    x_ptr, y_ptr,
    H: tl.int64, W: tl.int64, HP: tl.int64, WP: tl.int64, top: tl.int64, left: tl.int64,
    C: tl.int64, planes: tl.int64, per_program: tl.int64,
    xs0: tl.int64, xs1: tl.int64, xs3: tl.int64, xs4: tl.int64,
    BIG: tl.constexpr, BLOCK_Q: tl.constexpr,
):  # fmt: skip
    """``y[n, c, r, q] = x[n, c, r - top, q - left]`` inside ``x``, else 0: 2-D planes
    (``[N, C, 1, H, W]``, any strides) into dense ``[N, C, 1, HP, WP]`` ones. Grid:
    (blocks of ``BLOCK_Q`` positions of a padded plane, runs of ``per_program`` planes):
    a program divides its positions into (row, column) once and copies them for each of
    its planes, one masked load and one store an element (every plane has the same
    shape: a first version dividing per element and tile ran at 0.9 TB/s on an H200)."""
    q = _idx(tl.program_id(0), BIG) * BLOCK_Q + tl.arange(0, BLOCK_Q)
    H, W, HP, WP = _idx(H, BIG), _idx(W, BIG), _idx(HP, BIG), _idx(WP, BIG)
    q_ok = q < HP * WP
    xr, xq = q // WP - _idx(top, BIG), q % WP - _idx(left, BIG)
    inside = q_ok & (xr >= 0) & (xr < H) & (xq >= 0) & (xq < W)
    src = xr * _idx(xs3, BIG) + xq * _idx(xs4, BIG)
    C, planes = _idx(C, BIG), _idx(planes, BIG)
    first = _idx(tl.program_id(1), BIG) * _idx(per_program, BIG)
    for i in range(0, tl.minimum(_idx(per_program, BIG), planes - first)):  # a count
        plane = first + i
        base = (plane // C) * _idx(xs0, BIG) + (plane % C) * _idx(xs1, BIG)
        v = tl.load(x_ptr + base + src, mask=inside, other=0.0)
        tl.store(y_ptr + plane * (HP * WP) + q, v, mask=q_ok)


_pad = Launcher(_pad_kernel)

#: Planes a program of :func:`_pad_kernel` copies.
PAD_PLANES_PER_PROGRAM = 16


def padded_planes(x5: torch.Tensor, top: int, bottom: int, left: int, right: int,
                  big: bool) -> torch.Tensor:  # fmt: skip
    """``x5`` (``[N, C, 1, H, W]``) zero-padded by ``top``/``bottom`` rows and
    ``left``/``right`` columns, dense: one read and one write of the planes, so that
    :func:`_depthwise_kernel` can run with ``NO_BOUNDS``."""
    N, C, _, H, W = x5.shape
    HP, WP = H + top + bottom, W + left + right
    y = torch.empty((N, C, 1, HP, WP), dtype=x5.dtype, device=x5.device)
    bq = min(1024, max(16, next_pow2(HP * WP)))
    per = PAD_PLANES_PER_PROGRAM
    xs0, xs1, _, xs3, xs4 = x5.stride()
    _pad((cdiv(HP * WP, bq), cdiv(N * C, per)),
         (x5, y, H, W, HP, WP, top, left, C, N * C, per, xs0, xs1, xs3, xs4),
         BIG=big, BLOCK_Q=bq, num_warps=4)  # fmt: skip
    return y


#: NCHW planes (1-D, 2-D, uniform taps) zero-padded first (:func:`padded_planes`: one
#: read and one write of the input) so the direct kernel runs without bounds
#: (``NO_BOUNDS``: unmasked loads), where the kernel has at least :data:`DW_PAD_MIN_TAPS`
#: taps and the padded plane is at most :data:`DW_PAD_MAX_GROWTH` times the plane. On an H200 (2026-11-28,
#: ``dw-padded-h200-2026-11-28.md``, device time, the 8 most used depthwise rows of each
#: half) the kernel itself ran 1.3-1.9x faster without bounds (``[32, 728, 19, 19]`` 3x3
#: 62 -> 45 us, ``[32, 768, 32, 32]`` 7x7 842 -> 433), but the padding costs its own pass
#: (17 us there): on the tuning half padding won on the forward 5x5 rows (0.68 -> 0.77,
#: 0.92 -> 0.95, 0.81 -> 0.93x eager) and lost on the 3x3 ones of small planes (11 x 11:
#: 0.75 -> 0.65) and on a 7 x 7 plane grown 2.5x (0.55 -> 0.51); the rule below was
#: read from those rows; held out it picks the 5x5 and 7x7 rows (0.81 -> 0.89, 1.08 ->
#: 1.89, the 11 x 11 one even).
DW_PADDED = True
#: Fewest kernel taps for which the padding pays (5 x 5 and up).
DW_PAD_MIN_TAPS = 25
#: Largest growth of a plane's area the padding may cost.
DW_PAD_MAX_GROWTH = 2


def no_bounds_pads(
    transposed: bool, size: list[int], size_out: list[int], ksize: list[int],
    stride: list[int], padding: list[int], dilation: list[int],
) -> tuple[tuple[int, int, int, int], tuple[int, int]] | None:  # fmt: skip
    """For the direct depthwise kernel's ``NO_BOUNDS`` mode over 2-D planes (uniform
    taps): ``(top, bottom, left, right)`` zeros around the input so that every tap of
    every output position reads inside it, and the padding to give the kernel then; None
    where the kernel has fewer than :data:`DW_PAD_MIN_TAPS` taps or the planes would grow
    past :data:`DW_PAD_MAX_GROWTH` times their area. Forward: input
    position ``o * s - p + k * d``; transposed (unit stride): ``o + p - k * d``. None
    as well where :data:`DW_PADDED` is off. ``conv.convolution`` asks it of every
    NCHW depthwise convolution with uniform taps over 1-D or 2-D planes."""
    if not DW_PADDED:
        return None
    sides, new_pad = [], []
    for n, o, k, s, p, d in zip(size, size_out, ksize, stride, padding, dilation):
        lo, hi = (
            ((o - 1) * s - p + (k - 1) * d, -p) if not transposed else (o - 1 + p, p - (k - 1) * d)
        )
        lo, hi = min(lo, hi), max(lo, hi)  # the first and last input positions read
        before, after = max(0, -lo), max(0, hi - (n - 1))
        sides += [before, after]
        new_pad.append(p - before if not transposed else p + before)
    grown = (size[0] + sides[0] + sides[1]) * (size[1] + sides[2] + sides[3])
    if grown > DW_PAD_MAX_GROWTH * size[0] * size[1] or ksize[0] * ksize[1] < DW_PAD_MIN_TAPS:
        return None
    return (sides[0], sides[1], sides[2], sides[3]), (new_pad[0], new_pad[1])


class DepthwisePlan(NamedTuple):
    """What :func:`depthwise_plan` decides for a call: how the weight is read
    (``"taps_major"``: :func:`taps_major`'s copy; ``"contiguous"``: a dense copy; ``"as_is"``),
    the planes' zero padding (``((top, bottom, left, right), 64-bit offsets)``) or None,
    and the launch: grid, the integer arguments after the four pointers, the constexprs."""

    weight: str
    pads: tuple[tuple[int, int, int, int], bool] | None
    grid: tuple[int, ...]
    ints: tuple[int, ...]
    consts: dict[str, Any]
    #: Which kernel launches: ``"gather"`` (this module's), ``"rows"``
    #: (:mod:`~opbench.kernels._lib.conv_depthwise_rows`' NCHW row walk, its ``rows_plan``)
    #: or ``"cl_rows"`` (:mod:`~opbench.kernels._lib.conv_depthwise_cl_rows`' channels-last
    #: walk, its ``cl_rows_plan``).
    kernel: str = "gather"


def depthwise_plan(
    x_shape: tuple[int, ...], x_stride: tuple[int, ...], w_shape: tuple[int, ...],
    w_stride: tuple[int, ...], y_shape: tuple[int, ...], y_stride: tuple[int, ...],
    cin_g: int, cout_g: int, stride: tuple[int, int, int], padding: tuple[int, int, int],
    dilation: tuple[int, int, int], transposed: bool, spatial: int, has_bias: bool,
    i32_limit: int, tunables: tuple[Any, ...],
) -> DepthwisePlan:  # fmt: skip
    """The direct kernel's launch for 5-D views (``[N, C, D, H, W]``) of these sizes and
    strides: everything of a depthwise convolution that follows from sizes, strides and
    settings alone, kept per distinct call (a model calls few shapes many times).
    ``tunables``: ``(BLOCK_P, BLOCK_C, num_warps, num_stages, W_TILE, unroll_max_kh)``
    as ``conv`` picks them; the padding rule's settings (:data:`DW_PADDED`, ...) and the row
    walk's (:func:`~opbench.kernels._lib.conv_depthwise_rows.rows_settings`) join the key here, so a
    change of any setting (a sweep's ``--set``, a test's) is a new plan. ``i32_limit``:
    offsets from it on need 64-bit indexing (``conv._I32_LIMIT``)."""
    return _plan(x_shape, x_stride, w_shape, w_stride, y_shape, y_stride, cin_g, cout_g,
                 stride, padding, dilation, transposed, spatial, has_bias, i32_limit,
                 tunables, (DW_PADDED, DW_PAD_MIN_TAPS, DW_PAD_MAX_GROWTH, *rows_settings(),
                           *cl_rows_settings()))  # fmt: skip


@functools.lru_cache(maxsize=4096)
def _plan(
    x_shape: tuple[int, ...], x_stride: tuple[int, ...], w_shape: tuple[int, ...],
    w_stride: tuple[int, ...], y_shape: tuple[int, ...], y_stride: tuple[int, ...],
    cin_g: int, cout_g: int, stride: tuple[int, int, int], padding: tuple[int, int, int],
    dilation: tuple[int, int, int], transposed: bool, spatial: int, has_bias: bool,
    i32_limit: int, tunables: tuple[Any, ...], _pad_rule: tuple[Any, ...],
) -> DepthwisePlan:  # fmt: skip
    bp, bc, warps, stages, w_tile, unroll_max_kh = tunables
    N, C_in, D, H, W = x_shape
    OD, OH, OW = y_shape[2:]
    A, B, KD, KH, KW = w_shape
    C_out = y_shape[1]
    sd, sh, sw = stride
    pd, ph, pw = padding
    dd, dh, dw = dilation
    M = N * OD * OH * OW
    rows_big = max(_span(x_shape, x_stride), _span(w_shape, w_stride), _span(y_shape, y_stride),
                   N * C_in + conv_depthwise_rows.DW_ROWS_TILE) >= i32_limit  # fmt: skip
    rows = rows_plan(x_shape, x_stride, w_stride, y_shape, y_stride, (KD, KH, KW), cin_g, cout_g,
                     stride, padding, dilation, transposed, spatial, has_bias, rows_big)  # fmt: skip
    if rows is not None:
        return DepthwisePlan("as_is", None, *rows, kernel="rows")
    cl_rows = cl_rows_plan(x_shape, x_stride, y_shape, y_stride, (KD, KH, KW), cin_g, cout_g,
                           stride, padding, dilation, transposed, spatial, has_bias, rows_big)  # fmt: skip
    if cl_rows is not None:
        return DepthwisePlan("taps_major", None, *cl_rows, kernel="cl_rows")
    inner = x_stride[1] == 1 and C_in > 1  # channels-last: channels contiguous
    taps = KD * KH * KW
    dense_span = A * B * taps - 1  # the last element of a dense copy
    if inner:  # a tap's channels contiguous: taps_major's [k..., A, B] copy
        weight, w_strides, w_span = "taps_major", (B, 1, A * B), dense_span
    elif w_stride[2:] != (KH * KW, KW, 1) and A * B * taps > 0:
        # the kernel reads a channel's taps as dense
        weight, w_strides, w_span = "contiguous", (B * taps, taps, 1), dense_span
    else:
        weight, w_strides, w_span = "as_is", (w_stride[0], w_stride[1], 1), _span(w_shape, w_stride)
    uniform = not transposed or stride == (1, 1, 1)
    pads, sides = None, None
    if uniform and not inner and spatial < 3:
        sides = no_bounds_pads(transposed, [H, W], [OH, OW], [KH, KW], [sh, sw], [ph, pw],
                               [dh, dw])  # fmt: skip
    if sides is not None:  # zero-padded planes: the kernel checks no bounds
        (top, bottom, left, right), (ph, pw) = sides
        H, W = H + top + bottom, W + left + right
        padded = N * C_in * H * W
        pads = ((top, bottom, left, right), max(_span(x_shape, x_stride), padded) >= i32_limit)
        x_stride = (C_in * H * W, H * W, H * W, W, 1)
        x_shape = (N, C_in, 1, H, W)
    big = max(_span(x_shape, x_stride), w_span, _span(y_shape, y_stride), M + bp,
              C_out + bc) >= i32_limit  # fmt: skip
    ints = (M, C_out, D, H, W, OD, OH, OW, pd, ph, pw, *x_stride, *w_strides, *y_stride)
    consts = dict(
        CIN_G=cin_g, COUT_G=cout_g, KD=KD, KH=KH, KW=KW, SD=sd, SH=sh, SW=sw,
        DD=dd, DH=dh, DW=dw, TRANSPOSED=transposed, SGN=-1 if transposed else 1,
        UNIFORM=uniform, HAS_D=spatial == 3, HAS_BIAS=has_bias, BIG=big,
        CHANNELS_INNER=inner, NO_BOUNDS=pads is not None, BLOCK_P=bp, BLOCK_C=bc,
        num_warps=warps, num_stages=stages, W_TILE=w_tile,
        KH_UNROLL=KH if KH <= unroll_max_kh else 1,
    )  # fmt: skip
    return DepthwisePlan(weight, pads, (cdiv(M, bp), cdiv(C_out, bc)), ints, consts)


def prepared_weight(w5: torch.Tensor, how: str) -> torch.Tensor:
    """``w5`` as :class:`DepthwisePlan` ``weight`` says the kernel reads it."""
    if how == "taps_major":
        return taps_major(w5)
    if how == "contiguous":
        return w5.contiguous()
    return w5
