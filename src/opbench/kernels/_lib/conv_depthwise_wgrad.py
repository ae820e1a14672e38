"""The weight gradient of a depthwise convolution as a direct Triton kernel (no ``tl.dot``).

:func:`~opbench.kernels._lib.conv_backward._weight_grad` routes here the weights whose every row
reads one channel of the gathered tensor (``C_G == 1``: a depthwise convolution of any
channel multiplier, or a transposed one whose output channels each come from one input
channel). The implicit GEMM (:func:`~opbench.kernels._lib.conv_kernels._wgrad_kernel`)
pads such a group's 1 x 1 product to ``tl.dot``'s 16 x 16 and runs a program a group and
kernel position: on the H100 the traced depthwise backward rows ran at 0.01-0.09x eager
(``benchmarks/results/conv-heldout-h100-2026-11-28.md``; the tuning half's three at
0.015-0.083x), the slowest path of the backend.

Here a program owns ``BLOCK_C`` channels and every kernel position at once (``BLOCK_T``,
the kernel volume rounded up to a power of two) and walks its share of the summed
positions ``BLOCK_P`` at a time: the summed tensor's ``[channels, positions]`` tile is
loaded once a step and multiplied with the gathered tensor at all the taps' offsets (a
``[taps, channels, positions]`` gather whose neighbouring taps hit L1), accumulated in fp32
and summed over positions once at the end. The positions are split over programs (as
matmul's split-K) where the channels alone give too few programs, and the fp32 partials
summed in a fixed order by :func:`~opbench.kernels._lib.matmul_shared.sum_split_partials`,
so the same inputs give the same bits.

Only triton.language builtins inside the kernel (``tl.full``, no ``tl.zeros``; ``tl.reduce``
with the standard sum, no ``tl.sum``): ``conv_kernels``' docstring says why.
"""

from __future__ import annotations

import torch
import triton.language as tl

from opbench.kernels._lib import conv_depthwise_wgrad_dot as dot
from opbench.kernels._lib import conv_depthwise_wgrad_rows as rows
from opbench.kernels._lib import conv_depthwise_wgrad_walk as walk
from opbench.kernels._lib.conv_depthwise_wgrad_cl_walk import (
    cl_walk_mixed_weight_grad,
    cl_walk_weight_grad,
)
from opbench.kernels._lib.conv_kernels import _idx, _idx5, _unflatten
from opbench.kernels._lib.launch import Launcher, cdiv, jit_unspecialized, next_pow2
from opbench.kernels._lib.matmul import split_plan
from opbench.kernels._lib.matmul_shared import sm_count, split_target, sum_split_target
from opbench.kernels._lib.reduction_kernels import _SUM_COMBINE

__all__ = [
    "DWG_PLANE",
    "DWG_PLANE_TILE",
    "DWG_PROGRAMS_PER_SM",
    "DWG_TILE",
    "DWG_WARPS",
    "depthwise_weight_grad",
    "dwg_blocks",
    "dwg_plane_blocks",
    "dwg_plane_splits",
    "dwg_splits",
]

#: Elements of a program's fp32 accumulator (taps x channels x positions; half as many in
#: float32, whose compensation takes as many registers again) and its warps. Picked on the
#: tuning half's 30 most used depthwise backward rows on the H100 (2026-11-28,
#: ``benchmarks/results/dwg-sweep-h100-2026-11-28.md``): 2048 x 8 warps 0.190x eager's
#: whole backward (4096 x 4, the first guess: 0.170; 8192 x 4: 0.096); on the held-out
#: half's 30, 0.228x. Still far behind cuDNN: see that file.
DWG_TILE = 2048
DWG_WARPS = 8
#: Programs a streaming multiprocessor the positions are split for (at least 8 position
#: blocks each). Matmul's split-K rule (:func:`~opbench.kernels._lib.matmul.split_k`)
#: splits only where the tiles fill less than half the GPU: with a channel a tile, 72
#: channels over 401K positions (``[128, 72, 56, 56]``) ran as 72 programs of 3,136
#: steps, 4.9 ms against eager's 0.30 ms for the whole backward (2026-11-28, before this
#: rule; untimed since).
DWG_PROGRAMS_PER_SM = 4


@jit_unspecialized
def _dwg_kernel(
    a_ptr, b_ptr, dw_ptr,
    P: tl.int64, C: tl.int64, R_G: tl.int64, p_per_split: tl.int64, s_split: tl.int64,
    PD: tl.int64, PH: tl.int64, PW: tl.int64, QD: tl.int64, QH: tl.int64, QW: tl.int64,
    pd: tl.int64, ph: tl.int64, pw: tl.int64, dd: tl.int64, dh: tl.int64, dw: tl.int64,
    as0: tl.int64, as1: tl.int64, as2: tl.int64, as3: tl.int64, as4: tl.int64,
    bs0: tl.int64, bs1: tl.int64, bs2: tl.int64, bs3: tl.int64, bs4: tl.int64,
    ws0: tl.int64, ws2: tl.int64, ws3: tl.int64, ws4: tl.int64,
    KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr,
    SD: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
    HAS_D: tl.constexpr, BIG: tl.constexpr, POS_INNER: tl.constexpr, KAHAN: tl.constexpr,
    BLOCK_T: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_P: tl.constexpr,
):  # fmt: skip
    """``dw[c, 0, k] = sum over batch and positions q of A[n, c, q] * B[n, c // R_G,
    q * stride - padding + k * dilation]`` (zero outside B), ``c < C`` the weight's rows.

    Grid: (channel tiles, splits of the positions; ``p_per_split`` blocks of ``BLOCK_P``
    each). ``POS_INNER`` (NCHW-like: A's positions contiguous) builds the tiles
    ``[taps, channels, positions]``, else ``[taps, positions, channels]`` so the
    channels-last loads run along the channels. Split partials (fp32) go to a workspace
    ``[splits, *dw]``, ``s_split`` apart. ``KAHAN`` (float32): each lane's running sum
    carries Kahan's compensation, as matmul's ``dot_acc`` does; without it a lane's chain
    of a few hundred products was past the judge's float32 bound."""
    pid_c = tl.program_id(0)
    split = tl.program_id(1)
    P, C, R_G = _idx(P, BIG), _idx(C, BIG), _idx(R_G, BIG)
    PD, PH, PW = _idx(PD, BIG), _idx(PH, BIG), _idx(PW, BIG)
    QD, QH, QW = _idx(QD, BIG), _idx(QH, BIG), _idx(QW, BIG)
    as0, as1, as2, as3, as4 = _idx5(as0, as1, as2, as3, as4, BIG)
    bs0, bs1, bs2, bs3, bs4 = _idx5(bs0, bs1, bs2, bs3, bs4, BIG)
    rc = _idx(pid_c, BIG) * BLOCK_C + tl.arange(0, BLOCK_C)
    c_ok = rc < C
    rt = tl.arange(0, BLOCK_T)
    t_ok = rt < KD * KH * KW
    kd = rt // (KH * KW)
    kh = (rt // KW) % KH
    kw = rt % KW
    ed = _idx(kd, BIG) * _idx(dd, BIG) - _idx(pd, BIG)
    eh = _idx(kh, BIG) * _idx(dh, BIG) - _idx(ph, BIG)
    ew = _idx(kw, BIG) * _idx(dw, BIG) - _idx(pw, BIG)
    b_tap = eh * bs3 + ew * bs4  # [T]: each tap's offset into B
    if HAS_D:
        b_tap += ed * bs2
    a_chan = rc * as1
    b_chan = (rc // R_G) * bs1
    p_lo = split * _idx(p_per_split, BIG) * BLOCK_P
    if POS_INNER:
        acc = tl.full([BLOCK_T, BLOCK_C, BLOCK_P], 0, tl.float32)
    else:
        acc = tl.full([BLOCK_T, BLOCK_P, BLOCK_C], 0, tl.float32)
    comp = acc
    for i in range(0, _idx(p_per_split, BIG)):  # a count: see matmul's K loop
        p = p_lo + i * BLOCK_P + tl.arange(0, BLOCK_P)
        p_ok = p < P
        nb, qd, qh, qw = _unflatten(p, QD, QH, QW)
        a_pos = nb * as0 + qh * as3 + qw * as4
        b_pos = nb * bs0 + (qh * SH) * bs3 + (qw * SW) * bs4
        ih = (qh * SH)[None, :] + eh[:, None]  # [T, P]
        iw = (qw * SW)[None, :] + ew[:, None]
        ok = t_ok[:, None] & p_ok[None, :] & (ih >= 0) & (ih < PH) & (iw >= 0) & (iw < PW)
        if HAS_D:
            a_pos += qd * as2
            b_pos += (qd * SD) * bs2
            i_d = (qd * SD)[None, :] + ed[:, None]
            ok = ok & (i_d >= 0) & (i_d < PD)
        tap_pos = b_pos[None, :] + b_tap[:, None]  # [T, P]
        if POS_INNER:
            a = tl.load(a_ptr + a_chan[:, None] + a_pos[None, :],
                        mask=c_ok[:, None] & p_ok[None, :], other=0.0).to(tl.float32)  # fmt: skip
            b = tl.load(b_ptr + b_chan[None, :, None] + tap_pos[:, None, :],
                        mask=c_ok[None, :, None] & ok[:, None, :], other=0.0).to(tl.float32)  # fmt: skip
        else:
            a = tl.load(a_ptr + a_pos[:, None] + a_chan[None, :],
                        mask=p_ok[:, None] & c_ok[None, :], other=0.0).to(tl.float32)  # fmt: skip
            b = tl.load(b_ptr + tap_pos[:, :, None] + b_chan[None, None, :],
                        mask=ok[:, :, None] & c_ok[None, None, :], other=0.0).to(tl.float32)  # fmt: skip
        if KAHAN:
            y = b * a[None, :, :] - comp
            t = acc + y
            # no compensation once the sum is Inf (Inf - Inf would make it NaN)
            comp = tl.where((t - t) == 0, (t - acc) - y, 0.0)
            acc = t
        else:
            acc += b * a[None, :, :]
    if POS_INNER:
        part = tl.reduce(acc, 2, _SUM_COMBINE)  # [T, C]
    else:
        part = tl.reduce(acc, 1, _SUM_COMBINE)  # [T, C]
    offs = (rc * _idx(ws0, BIG))[None, :] + (
        _idx(kd, BIG) * _idx(ws2, BIG)
        + _idx(kh, BIG) * _idx(ws3, BIG)
        + _idx(kw, BIG) * _idx(ws4, BIG)
    )[:, None]
    tl.store(dw_ptr + split * _idx(s_split, BIG) + offs, part.to(dw_ptr.dtype.element_ty),
             mask=t_ok[:, None] & c_ok[None, :])  # fmt: skip


_dwg = Launcher(_dwg_kernel)


#: The plane kernel (:func:`_dwg_plane_kernel`) for inputs whose positions are contiguous
#: (NCHW-like); the position-flattening kernel above keeps channels-last ones. The first
#: kernel ran the held-out half's ``[32, 728, 19, 19]`` 3x3 weight gradient in 540 us on the
#: H100 (cuDNN: 40 us; ``conv-heldout-nhwc-h100-2026-11-28.json``, ``kernels_us``): 728
#: programs of one channel, each 91 serial steps of 128 flattened positions, every step
#: dividing its positions back into (image, row, column) and gathering 16 padded taps.
#: On an H200 (``dwg-plane-h200-2026-11-28.md``, the 8 most used depthwise backward rows of
#: each half, device time): whole backward 0.179x -> 0.422x eager on the tuning half,
#: 0.162x -> 0.379x held out; that row's weight gradient 186 us (cuDNN 40): still the
#: slower half of every depthwise backward.
DWG_PLANE = True
#: The plane kernel's tile (taps rounded up to a power of two x positions of one image's
#: plane; half of it in float32, whose compensation doubles the registers), warps and
#: pipeline stages. 2048 chosen on the tuning half (same file: 0.436x against 0.422x at
#: 4096, 0.394x at 8192; held out 0.416x against 0.379x); 8 warps, 3 stages and two images
#: a step (:data:`DWG_PLANE_IMAGES`) did not help there (0.421x, 0.421x, 0.400x).
DWG_PLANE_TILE = 2048
DWG_PLANE_WARPS = 4
DWG_PLANE_STAGES = 2
#: Images a step of the plane kernel: their loads issued together, so more of them are in
#: flight a program.
DWG_PLANE_IMAGES = 1


@jit_unspecialized
def _dwg_plane_kernel(
    a_ptr, b_ptr, dw_ptr,
    N: tl.int64, R_G: tl.int64, n_per_split: tl.int64, splits: tl.int64, s_split: tl.int64,
    PD: tl.int64, PH: tl.int64, PW: tl.int64, QD: tl.int64, QH: tl.int64, QW: tl.int64,
    pd: tl.int64, ph: tl.int64, pw: tl.int64, dd: tl.int64, dh: tl.int64, dw: tl.int64,
    as0: tl.int64, as1: tl.int64, as2: tl.int64, as3: tl.int64, as4: tl.int64,
    bs0: tl.int64, bs1: tl.int64, bs2: tl.int64, bs3: tl.int64, bs4: tl.int64,
    ws0: tl.int64, ws2: tl.int64, ws3: tl.int64, ws4: tl.int64,
    KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr,
    SD: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
    HAS_D: tl.constexpr, BIG: tl.constexpr, KAHAN: tl.constexpr, IMAGES: tl.constexpr,
    BLOCK_T: tl.constexpr, BLOCK_Q: tl.constexpr,
):  # fmt: skip
    """The same sum as :func:`_dwg_kernel`, a program a (weight row ``c``, block of
    ``BLOCK_Q`` positions of one image's output plane, split of the images).

    Every image has the same plane, so a program divides its positions into (depth, row,
    column) and forms its ``[taps, positions]`` gather offsets and bounds once; a step is
    then ``IMAGES`` images: A's ``[BLOCK_Q]`` row and B's gather, both at the image's
    offset (an image past the split's count masked off), one FMA an element into a
    ``[BLOCK_T, BLOCK_Q]`` fp32 accumulator, summed over positions at the end. Partials
    (fp32) go to a workspace row ``pid_q * splits + split`` (``s_split`` apart) where
    there are several."""
    c = tl.program_id(0)
    pid_q = tl.program_id(1)
    split = tl.program_id(2)
    N, R_G = _idx(N, BIG), _idx(R_G, BIG)
    PD, PH, PW = _idx(PD, BIG), _idx(PH, BIG), _idx(PW, BIG)
    QD, QH, QW = _idx(QD, BIG), _idx(QH, BIG), _idx(QW, BIG)
    as0, as1, as2, as3, as4 = _idx5(as0, as1, as2, as3, as4, BIG)
    bs0, bs1, bs2, bs3, bs4 = _idx5(bs0, bs1, bs2, bs3, bs4, BIG)
    q = _idx(pid_q, BIG) * BLOCK_Q + tl.arange(0, BLOCK_Q)
    q_ok = q < QD * QH * QW
    qw = q % QW
    qh = (q // QW) % QH
    qd = q // (QW * QH)
    rt = tl.arange(0, BLOCK_T)
    t_ok = rt < KD * KH * KW
    kd = rt // (KH * KW)
    kh = (rt // KW) % KH
    kw = rt % KW
    ih = (qh * SH)[None, :] + (_idx(kh, BIG) * _idx(dh, BIG) - _idx(ph, BIG))[:, None]
    iw = (qw * SW)[None, :] + (_idx(kw, BIG) * _idx(dw, BIG) - _idx(pw, BIG))[:, None]
    ok = t_ok[:, None] & q_ok[None, :] & (ih >= 0) & (ih < PH) & (iw >= 0) & (iw < PW)
    b_off = ih * bs3 + iw * bs4  # [T, Q]
    a_off = qh * as3 + qw * as4  # [Q]
    if HAS_D:
        i_d = (qd * SD)[None, :] + (_idx(kd, BIG) * _idx(dd, BIG) - _idx(pd, BIG))[:, None]
        ok = ok & (i_d >= 0) & (i_d < PD)
        b_off += i_d * bs2
        a_off += qd * as2
    n0 = split * _idx(n_per_split, BIG)
    a_p = a_ptr + _idx(c, BIG) * as1 + n0 * as0 + a_off
    b_p = b_ptr + (_idx(c, BIG) // R_G) * bs1 + n0 * bs0 + b_off
    acc = tl.full([BLOCK_T, BLOCK_Q], 0, tl.float32)
    comp = acc
    count = tl.minimum(_idx(n_per_split, BIG), N - n0)
    for i in range(0, (count + IMAGES - 1) // IMAGES):  # a count of steps
        for j in tl.static_range(IMAGES):  # IMAGES images' loads issued together
            there = (q * 0 + (i * IMAGES + j)) < count  # [Q]: a scalar mask is refused
            a = tl.load(a_p + j * as0, mask=q_ok & there, other=0.0).to(tl.float32)
            b = tl.load(b_p + j * bs0, mask=ok & there[None, :], other=0.0).to(tl.float32)
            if KAHAN:
                y = b * a[None, :] - comp
                t = acc + y
                # no compensation once the sum is Inf (Inf - Inf would make it NaN)
                comp = tl.where((t - t) == 0, (t - acc) - y, 0.0)
                acc = t
            else:
                acc += b * a[None, :]
        a_p += IMAGES * as0
        b_p += IMAGES * bs0
    part = tl.reduce(acc, 1, _SUM_COMBINE)  # [T]
    offs = _idx(c, BIG) * _idx(ws0, BIG) + (
        _idx(kd, BIG) * _idx(ws2, BIG) + _idx(kh, BIG) * _idx(ws3, BIG)
        + _idx(kw, BIG) * _idx(ws4, BIG)
    )  # fmt: skip
    row = _idx(pid_q, BIG) * _idx(splits, BIG) + split
    tl.store(dw_ptr + row * _idx(s_split, BIG) + offs, part.to(dw_ptr.dtype.element_ty),
             mask=t_ok)  # fmt: skip


_dwg_plane = Launcher(_dwg_plane_kernel)


def dwg_plane_blocks(kvol: int, plane: int, tile: int = DWG_PLANE_TILE) -> tuple[int, int]:
    """(BLOCK_T, BLOCK_Q): the kernel volume rounded up to a power of two, and as many of
    a plane's ``plane`` positions as the ``tile`` leaves (at least 16: a warp's half-row)."""
    bt = next_pow2(kvol)
    return bt, max(16, min(next_pow2(plane), tile // bt))


def dwg_plane_splits(programs: int, images: int, sms: int) -> int:
    """Splits of the ``images`` for ``programs`` (weight rows x plane blocks) on ``sms``
    multiprocessors: :data:`DWG_PROGRAMS_PER_SM` programs a multiprocessor in all, each at
    least 4 images, at most 256 splits; 1 where the rows and blocks alone fill the GPU."""
    return max(1, min(images // 4, cdiv(DWG_PROGRAMS_PER_SM * sms, programs), 256))


def dwg_blocks(
    kvol: int, channels: int, pos_inner: bool, tile: int = DWG_TILE
) -> tuple[int, int, int]:
    """(BLOCK_T, BLOCK_C, BLOCK_P) for a kernel volume of ``kvol`` over ``channels``
    weight rows, the accumulator at most ``tile`` elements. NCHW keeps positions wide (the
    contiguous axis: 64 or more where the taps allow); channels-last keeps 16 channels or
    as many as there are (8 f16 channels are one 16-byte load)."""
    bt = next_pow2(kvol)
    per = max(1, tile // bt)  # channels x positions a step
    if pos_inner:
        bp = min(per, 128)
        bc = max(1, min(per // bp, next_pow2(channels)))
    else:
        bc = max(1, min(16, next_pow2(channels), per))
        bp = max(1, per // bc)
    return bt, bc, bp


def dwg_splits(tiles: int, iters: int, sms: int) -> int:
    """Programs along the positions for ``tiles`` channel tiles over ``iters`` position
    blocks on ``sms`` multiprocessors: :data:`DWG_PROGRAMS_PER_SM` programs a
    multiprocessor in all, each at least 8 blocks, at most 256 splits (the partials'
    workspace is ``splits x`` the weight); 1 where the channels alone fill the GPU."""
    if iters < 16:
        return 1
    return max(1, min(iters // 8, cdiv(DWG_PROGRAMS_PER_SM * sms, tiles), 256))


def depthwise_weight_grad(
    a5: torch.Tensor, b5: torch.Tensor, dw: torch.Tensor, w5: torch.Tensor, r_g: int,
    stride: list[int], padding: list[int], dilation: list[int], spatial: int, big: bool,
) -> None:  # fmt: skip
    """``dw`` (``w5`` its 5-D view, ``[C, 1, KD, KH, KW]``) from ``a5`` (the summed
    tensor, 5-D) and ``b5`` (the gathered one). Where the positions are contiguous: 1-D
    and 2-D 16-bit ones on the tensor cores where each program sums enough rows
    (:mod:`~opbench.kernels._lib.conv_depthwise_wgrad_dot`; NCHW 3x3 16-bit ones through
    the row walk of :mod:`~opbench.kernels._lib.conv_depthwise_wgrad_walk` before it, where
    that is on), the rest through the plane
    kernel (:data:`DWG_PLANE`); where the channels are, the tap-row kernel of
    :mod:`~opbench.kernels._lib.conv_depthwise_wgrad_rows` (2-D, ``DWG_ROWS``), after the
    row walk of :mod:`~opbench.kernels._lib.conv_depthwise_wgrad_cl_walk` where that is on
    and serves the call; else the
    flattened kernel above, split over the positions as :func:`dwg_splits` says (evened
    out by matmul's :func:`~opbench.kernels._lib.matmul.split_plan`). ``r_g``: the
    weight's rows a gathered channel feeds (the channel multiplier); ``big``: 64-bit
    offsets."""
    one3, pad3 = [1] * (3 - spatial), [0] * (3 - spatial)
    sd, sh, sw = one3 + list(stride)
    pd, ph, pw = pad3 + list(padding)
    dd, dh, dw_ = one3 + list(dilation)
    QD, QH, QW = a5.shape[2:]
    PD, PH, PW = b5.shape[2:]
    KD, KH, KW = w5.shape[2:]
    C = w5.shape[0]
    P = a5.shape[0] * QD * QH * QW
    pos_inner = a5.stride(4) == 1 and a5.stride(1) != 1
    kahan = a5.dtype == torch.float32
    if spatial == 2 and cl_walk_mixed_weight_grad(a5, b5, dw, w5, r_g, (sh, sw), (ph, pw),
                                                  (dh, dw_), big):  # fmt: skip
        return
    if (
        pos_inner
        and spatial == 2
        and walk.walk_weight_grad(a5, b5, dw, w5, r_g, (sh, sw), (ph, pw), (dh, dw_), big)
    ):
        return
    if pos_inner and dot.dot_serves(a5, w5, sw, dw_, spatial):
        sms = sm_count(dw.device)
        if dot.dot_weight_grad(a5, b5, dw, w5, r_g, (sh, sw), (ph, pw), (dh, dw_), big,
                               lambda programs, images: dwg_plane_splits(programs, images, sms)):  # fmt: skip
            return
    if DWG_PLANE and pos_inner:
        _plane_weight_grad(a5, b5, dw, w5, r_g, (sd, sh, sw), (pd, ph, pw), (dd, dh, dw_),
                           spatial == 3, big, kahan)  # fmt: skip
        return
    if spatial == 2 and cl_walk_weight_grad(a5, b5, dw, w5, r_g, (sh, sw), (ph, pw),
                                            (dh, dw_), big):  # fmt: skip
        return
    if rows.DWG_ROWS and spatial < 3 and a5.stride(1) == 1 and C > 1:  # channels-last planes
        rows.rows_weight_grad(a5, b5, dw, w5, r_g, (sh, sw), (ph, pw), (dh, dw_), big)
        return
    bt, bc, bp = dwg_blocks(KD * KH * KW, C, pos_inner, DWG_TILE // 2 if kahan else DWG_TILE)
    tiles = cdiv(C, bc)
    iters = cdiv(P, bp)
    splits, per = split_plan(tiles, iters, dw.device, dwg_splits(tiles, iters, sm_count(dw.device)))
    target = split_target(dw, splits)
    _dwg(
        (tiles, splits),
        (a5, b5, target, P, C, r_g, per, dw.numel() if splits > 1 else 0,
         PD, PH, PW, QD, QH, QW, pd, ph, pw, dd, dh, dw_,
         *a5.stride(), *b5.stride(), w5.stride(0), *w5.stride()[2:]),
        KD=KD, KH=KH, KW=KW, SD=sd, SH=sh, SW=sw, HAS_D=spatial == 3, BIG=big,
        POS_INNER=pos_inner, KAHAN=kahan, BLOCK_T=bt, BLOCK_C=bc, BLOCK_P=bp, num_warps=DWG_WARPS,
    )  # fmt: skip
    sum_split_target(target, dw)


def _plane_weight_grad(
    a5: torch.Tensor, b5: torch.Tensor, dw: torch.Tensor, w5: torch.Tensor, r_g: int,
    stride: tuple[int, int, int], padding: tuple[int, int, int],
    dilation: tuple[int, int, int], has_d: bool, big: bool, kahan: bool,
) -> None:  # fmt: skip
    """:func:`depthwise_weight_grad` through :func:`_dwg_plane_kernel` (3-D ``stride``,
    ``padding``, ``dilation``)."""
    QD, QH, QW = a5.shape[2:]
    KD, KH, KW = w5.shape[2:]
    N, C = a5.shape[0], w5.shape[0]
    tile = DWG_PLANE_TILE // 2 if kahan else DWG_PLANE_TILE
    bt, bq = dwg_plane_blocks(KD * KH * KW, QD * QH * QW, tile)
    q_blocks = cdiv(QD * QH * QW, bq)
    splits, per = split_plan(C * q_blocks, N, dw.device,
                             dwg_plane_splits(C * q_blocks, N, sm_count(dw.device)))  # fmt: skip
    rows = q_blocks * splits
    target = split_target(dw, rows)
    _dwg_plane(
        (C, q_blocks, splits),
        (a5, b5, target, N, r_g, per, splits, dw.numel() if rows > 1 else 0,
         *b5.shape[2:], QD, QH, QW, *padding, *dilation,
         *a5.stride(), *b5.stride(), w5.stride(0), *w5.stride()[2:]),
        KD=KD, KH=KH, KW=KW, SD=stride[0], SH=stride[1], SW=stride[2], HAS_D=has_d, BIG=big,
        KAHAN=kahan, IMAGES=DWG_PLANE_IMAGES, BLOCK_T=bt, BLOCK_Q=bq, num_warps=DWG_PLANE_WARPS,
        num_stages=DWG_PLANE_STAGES,
    )  # fmt: skip
    sum_split_target(target, dw)
