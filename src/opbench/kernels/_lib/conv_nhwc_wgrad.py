"""The weight gradient of a dense convolution as a pipelined GEMM over channels-last data.

``conv_kernels._wgrad_kernel`` reads any strides: over NCHW tensors its steps gather
``[channels, positions]`` tiles with 2-byte loads that neither vectorize nor go through
``cp.async``, one synchronous step at a time. On the H100, once the input gradient took
:mod:`~opbench.kernels._lib.conv_nhwc`, the backward of the traced 3x3 convolutions
spent most of its device time there: ``[64, 256, 14, 14]`` x ``[256, 256, 3, 3]``'s
weight gradient 372 us of a 440 us backward, eager's whole backward 96 us
(``benchmarks/results/conv-heldout-nhwc-h100-2026-11-28.json``, ``kernels_us``).

Here both operands are read channels-last (copied once where they are not): the summed
tensor ``a`` (the gradient of the output; the input, for a transposed convolution) as
``[positions, channels]`` rows and the gathered tensor ``b`` at
``q * stride - padding + k * dilation``, so a step's tiles are ``BLOCK_K`` rows of
contiguous, 16-byte-aligned channels, and the loop over position blocks is one loop
Triton software-pipelines (``NHWC_WGRAD_STAGES``). One kernel position per program, the
positions split over programs where the tiles are few, fp32 partials summed in a fixed
order (:func:`~opbench.kernels._lib.matmul_shared.sum_split_partials`).

Only triton.language builtins inside the kernel: ``conv_kernels``' docstring says why.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from opbench.kernels._lib.channels_last_copy import channels_last_5d
from opbench.kernels._lib.conv_kernels import _idx, _kpos, _unflatten
from opbench.kernels._lib.launch import INTERPRETING as _INTERPRETING
from opbench.kernels._lib.launch import Launcher, cdiv, jit_unspecialized, next_pow2
from opbench.kernels._lib.matmul import split_plan
from opbench.kernels._lib.matmul_shared import dot_acc, split_target, sum_split_target
from opbench.kernels._lib.proven import multiple, row_alignment

__all__ = ["NHWC_WGRAD_MIN_CHANNELS", "nhwc_weight_grad", "nhwc_wgrad_blocks"]


#: Fewest channels a group needs on both sides (``a``'s and ``b``'s) for this path; below
#: it the general ``conv._wgrad_kernel`` serves. 64, chosen on the tuning half's 20 most
#: used backward rows on an H200 (``conv-heldout-bwd-variants-h200-2026-11-28.md``,
#: ``[wgrad]`` with 32; torch.profiler's kernel times): the rows of 64-256 channels went
#: from 0.08-0.38x eager to 0.30-0.59x (``[128, 144, 7, 7]`` 0.076 -> 0.295,
#: ``[3, 256, 128, 128]`` 0.17 -> 0.46), those of 36 and 56 lost (0.58 -> 0.23,
#: 0.65 -> 0.48). Held out, the rule's rows: ``[64, 256, 14, 14]`` 0.23 -> 0.39,
#: ``[64, 104, 14, 14]`` 0.43 -> 0.45; the 32-channel row it leaves out lost with it
#: (0.92 -> 0.66). Its first H100 run (529 us for ``[64, 256, 14, 14]``) was 2-byte,
#: unpipelined loads, read from the PTX: the group's first channel now sits in the rows
#: under their alignment hint, 16-byte ``cp.async`` into ``wgmma``. The tests route every
#: weight gradient here by setting it to 1.
NHWC_WGRAD_MIN_CHANNELS = 64
#: Tiles: ``BLOCK_M`` of ``a``'s channels x ``BLOCK_N`` of ``b``'s x ``BLOCK_K`` positions
#: a step; warps and pipeline stages. ``BLOCK_K`` 64 from the tuning half on an H200
#: (2026-12-01, device time, ``nhwc-wgrad-tile-h200-2026-12-01-*``): 1.078x over 32 on
#: the 4 of the 20 most used backward rows this path serves, 1.141x on 8 strided ones;
#: 4 stages or 128 positions on 2 stages were no better. Held out, judged after: 1.042x
#: (2 rows), 1.058x (9 strided). The 128x128 tile and 8 warps against 128x64 and 4 warps
#: on the tuning half's strided rows this path serves (H200, 2026-12-02, device time,
#: ``nhwc-wgrad-strided-variants-h200-2026-12-02.md``): 0.947x and 0.997x (7 rows), so
#: they stay (held out the two read 1.036x and 1.015x: not what decides).
NHWC_WGRAD_BLOCK_M = 128
NHWC_WGRAD_BLOCK_N = 128
NHWC_WGRAD_BLOCK_K = 64
NHWC_WGRAD_WARPS = 8
NHWC_WGRAD_STAGES = 3
#: Whether 2-D planes of at least a step's positions walk them (the kernel's ``WALK``:
#: no vector divisions in the loop) rather than dividing each lane's position each step.
#: H200, 2026-12-01, device time (``nhwc-wgrad-walk-h200-2026-12-01-*``), against
#: dividing: tuning half 1.11x (3 of the 20 most used backward rows this path serves) and
#: 1.07x (3 strided); held out, judged after, 1.07x (2) and 1.08x (7). The held-out
#: ``[64, 256, 14, 14]`` 3x3 weight gradient 147.5 -> 121.7 us (cuDNN 34.9).
NHWC_WGRAD_WALK = True
#: Whether rows may be 4- or 2-element aligned (``ALIGN`` the largest of 8, 4, 2, 1
#: dividing every row stride and both groups' channels) rather than 8 or else 1: channel
#: counts of 64 or more that are no multiple of 8 (116, 108, 84: RegNet's) then load
#: through 8- or 4-byte ``cp.async`` (48 a 128x128x64 step at 4) where they loaded 64
#: synchronous 2-byte elements a step (sm_90 PTX, ``test_kernel_ptx.py``). On since the
#: A/B with :data:`~opbench.kernels._lib.conv_nhwc.NHWC_X_ALIGN_PARTIAL` (its comment).
NHWC_WGRAD_ALIGN_PARTIAL = True


@triton.jit
def _walk(p0, d_row, d_col, QH, QW):
    """``(image, row, column)`` of positions ``p0 + d_row * QW + d_col`` over planes of
    ``QH x QW`` positions (``d_col < QW``), for a step that spans at most one plane
    boundary (a plane of at least the step's positions): ``p0`` divided as a scalar, each
    lane's column and row carried once."""
    w0 = p0 % QW
    t0 = p0 // QW
    h0 = t0 % QH
    qw = w0 + d_col
    c_col = qw >= QW
    qw = tl.where(c_col, qw - QW, qw)
    qh = h0 + d_row + c_col.to(d_row.dtype)
    c_row = qh >= QH
    qh = tl.where(c_row, qh - QH, qh)
    return t0 // QH + c_row.to(qh.dtype), qh, qw


@jit_unspecialized
def _nhwc_wgrad_kernel(
    a_ptr, b_ptr, dw_ptr,
    P: tl.int64, R_G: tl.int64, C_G: tl.int64, splits: tl.int64, steps_per_split: tl.int64,
    s_split: tl.int64,
    PD: tl.int64, PH: tl.int64, PW: tl.int64, QD: tl.int64, QH: tl.int64, QW: tl.int64,
    pd: tl.int64, ph: tl.int64, pw: tl.int64, dd: tl.int64, dh: tl.int64, dw: tl.int64,
    as0: tl.int64, as2: tl.int64, as3: tl.int64, as4: tl.int64,
    bs0: tl.int64, bs2: tl.int64, bs3: tl.int64, bs4: tl.int64,
    ws0: tl.int64, ws1: tl.int64, ws2: tl.int64, ws3: tl.int64, ws4: tl.int64,
    KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr,
    SD: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
    HAS_D: tl.constexpr, IEEE: tl.constexpr, TO_F32: tl.constexpr, BIG: tl.constexpr,
    ALIGN: tl.constexpr, EVEN_M: tl.constexpr, EVEN_N: tl.constexpr, WALK: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    """``dw[g*R_G + r, c, k] = sum over positions q of a[q, g*R_G + r] *
    b[q * stride - padding + k * dilation, g*C_G + c]`` (zero outside ``b``), both
    channels-last (channel stride 1). Grid: (``a``'s channel tiles, ``b``'s, group x
    kernel position x split). ``ALIGN``: every position's channel offset is a multiple
    of it in both (8: 16-byte rows); ``EVEN_M``/``EVEN_N``: the tiles divide the group's
    channels (no channel mask, which would stop the loads vectorizing). ``WALK`` (2-D,
    planes of at least ``BLOCK_K`` positions): a step's positions from its first one's
    (image, row, column), three scalar divisions, and each lane's fixed offset in rows
    and columns (divided once, before the loop), with one carry into the next row and one
    into the next image; without it every lane divides its position by the plane's sizes
    each step (45 integer divisions or remainders in the sm_90 code of a 128x128x64 step,
    13 with it; on an H200 that made the kernel 1.07-1.11x faster, a tenth of its gap to
    cuDNN: see :data:`NHWC_WGRAD_WALK`)."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    gks = tl.program_id(2)
    P, R_G, C_G = _idx(P, BIG), _idx(R_G, BIG), _idx(C_G, BIG)
    # ALIGN divides both groups' channel counts (the host's check), said as arithmetic
    # Triton reads: the channel masks of uneven tiles (96, 144, 288 channels) are then
    # constant over 8 channels, where they left those operands' loads 2-byte and outside
    # cp.async (none at all with both uneven; sm_90 PTX, kernel_ptx.py)
    R_G, C_G = multiple(R_G, ALIGN), multiple(C_G, ALIGN)
    PD, PH, PW = _idx(PD, BIG), _idx(PH, BIG), _idx(PW, BIG)
    QD, QH, QW = _idx(QD, BIG), _idx(QH, BIG), _idx(QW, BIG)
    as0, as2, as3, as4 = _idx(as0, BIG), _idx(as2, BIG), _idx(as3, BIG), _idx(as4, BIG)
    bs0, bs2, bs3, bs4 = _idx(bs0, BIG), _idx(bs2, BIG), _idx(bs3, BIG), _idx(bs4, BIG)
    splits = _idx(splits, BIG)
    split = gks % splits
    t = gks // splits
    kpos = t % (KD * KH * KW)
    g = t // (KD * KH * KW)
    kd, kh, kw = _kpos(kpos, KH, KW)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # a's channels of the group
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # b's channels of the group
    rk = tl.arange(0, BLOCK_K)
    m_ok = rm < R_G
    n_ok = rn < C_G
    ed = kd * _idx(dd, BIG) - _idx(pd, BIG)
    eh = kh * _idx(dh, BIG) - _idx(ph, BIG)
    ew = kw * _idx(dw, BIG) - _idx(pw, BIG)
    # the group's first channel goes into each row's offset, under the row's alignment
    # hint: kept in the columns, its unknown divisibility (R_G is a runtime size) made
    # every load 2-byte and unpipelined (sm_90 PTX: 32 ld.global.b16 a step, no cp.async)
    a_chan0 = g * R_G
    b_chan0 = g * C_G
    first = split * _idx(steps_per_split, BIG)
    last = tl.minimum(first + _idx(steps_per_split, BIG), (P + BLOCK_K - 1) // BLOCK_K)
    acc = tl.full([BLOCK_M, BLOCK_N], 0, tl.float32)
    comp = tl.full([BLOCK_M, BLOCK_N], 0, tl.float32)
    if WALK:  # each lane's offset from a step's first position, in rows and columns
        d_row, d_col = rk // QW, rk % QW
    for step in range(first, last):
        p = step * BLOCK_K + rk
        p_ok = p < P
        if WALK:
            nb, qh, qw = _walk(step * BLOCK_K, d_row, d_col, QH, QW)
            qd = qh  # unused: WALK is 2-D only
        else:
            nb, qd, qh, qw = _unflatten(p, QD, QH, QW)
        a_row = nb * as0 + qh * as3 + qw * as4 + a_chan0
        ih = qh * SH + eh
        iw = qw * SW + ew
        ok = p_ok & (ih >= 0) & (ih < PH) & (iw >= 0) & (iw < PW)
        b_row = nb * bs0 + ih * bs3 + iw * bs4 + b_chan0
        if HAS_D:
            a_row += qd * as2
            i_d = qd * SD + ed
            ok = ok & (i_d >= 0) & (i_d < PD)
            b_row += i_d * bs2
        a_row = tl.multiple_of(a_row, ALIGN)
        b_row = tl.multiple_of(b_row, ALIGN)
        # [positions, channels] tiles, channels contiguous; a's is used transposed
        a_mask = p_ok[:, None] if EVEN_M else p_ok[:, None] & m_ok[None, :]
        b_mask = ok[:, None] if EVEN_N else ok[:, None] & n_ok[None, :]
        at = tl.load(a_ptr + a_row[:, None] + rm[None, :], mask=a_mask, other=0.0)
        b = tl.load(b_ptr + b_row[:, None] + rn[None, :], mask=b_mask, other=0.0)
        acc, comp = dot_acc(tl.trans(at), b, acc, comp, IEEE, TO_F32)
    offs = ((g * R_G + rm) * _idx(ws0, BIG))[:, None] + (
        rn * _idx(ws1, BIG) + kd * _idx(ws2, BIG) + kh * _idx(ws3, BIG) + kw * _idx(ws4, BIG)
    )[None, :]
    # split partials (fp32) go to a workspace [splits, *dw], s_split apart
    tl.store(dw_ptr + split * _idx(s_split, BIG) + offs, acc.to(dw_ptr.dtype.element_ty),
             mask=m_ok[:, None] & n_ok[None, :])  # fmt: skip


_nhwc_wgrad = Launcher(_nhwc_wgrad_kernel)


def nhwc_wgrad_blocks(r_g: int, c_g: int) -> tuple[int, int, int, int, int]:
    """(BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages) for groups of ``r_g`` channels
    of ``a`` and ``c_g`` of ``b``."""
    bm = min(NHWC_WGRAD_BLOCK_M, max(16, next_pow2(r_g)))
    bn = min(NHWC_WGRAD_BLOCK_N, max(16, next_pow2(c_g)))
    if _INTERPRETING:  # few, tall steps: the interpreter pays per step
        return bm, bn, 256, 4, 1
    warps = NHWC_WGRAD_WARPS if bm * bn >= 128 * 128 else 4
    return bm, bn, NHWC_WGRAD_BLOCK_K, warps, NHWC_WGRAD_STAGES


def nhwc_weight_grad(
    a5: torch.Tensor, b5: torch.Tensor, w5: torch.Tensor, r_g: int, c_g: int, groups: int,
    stride: list[int], padding: list[int], dilation: list[int], has_d: bool, fits_i32,
) -> bool:  # fmt: skip
    """``w5`` (the weight gradient, 5-D, dense) from 5-D ``a5`` and ``b5`` through this
    module's kernel, or False where it does not serve it: groups of fewer than
    ``NHWC_WGRAD_MIN_CHANNELS`` channels on either side. ``fits_i32`` is
    :func:`~opbench.kernels._lib.conv._fits_i32`."""
    if min(r_g, c_g) < NHWC_WGRAD_MIN_CHANNELS:
        return False
    ac, bc = channels_last_5d(a5), channels_last_5d(b5)
    KD, KH, KW = w5.shape[2:]
    QD, QH, QW = a5.shape[2:]
    PD, PH, PW = b5.shape[2:]
    P = a5.shape[0] * QD * QH * QW
    bm, bn, bk, warps, stages = nhwc_wgrad_blocks(r_g, c_g)
    tiles = cdiv(r_g, bm) * cdiv(c_g, bn) * groups * KD * KH * KW
    splits, per = split_plan(tiles, cdiv(P, bk), w5.device)
    # P == 0 (an empty batch): the loop is empty and the kernel writes zeros
    target = split_target(w5, splits)
    sa, sb = ac.stride(), bc.stride()
    rows = (sa[0], sa[2], sa[3], sa[4], sb[0], sb[2], sb[3], sb[4], r_g, c_g)
    _nhwc_wgrad(
        (cdiv(r_g, bm), cdiv(c_g, bn), groups * KD * KH * KW * splits),
        (ac, bc, target, P, r_g, c_g, splits, per, w5.numel() if splits > 1 else 0,
         PD, PH, PW, QD, QH, QW, *padding, *dilation, sa[0], sa[2], sa[3], sa[4],
         sb[0], sb[2], sb[3], sb[4], *w5.stride()),
        KD=KD, KH=KH, KW=KW, SD=stride[0], SH=stride[1], SW=stride[2], HAS_D=has_d,
        IEEE=a5.dtype == torch.float32, TO_F32=_INTERPRETING,
        BIG=not fits_i32(ac, bc, target, counts=(P + (per + 1) * bk, c_g + bn)),
        ALIGN=row_alignment(*rows, partial=NHWC_WGRAD_ALIGN_PARTIAL), EVEN_M=r_g % bm == 0,
        EVEN_N=c_g % bn == 0, WALK=NHWC_WGRAD_WALK and not has_d and QH * QW >= bk,
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=warps, num_stages=stages,
    )  # fmt: skip
    sum_split_target(target, w5)
    return True
