"""The weight gradient of a channels-last depthwise convolution, a row of taps a program.

:func:`~opbench.kernels._lib.conv_depthwise_wgrad.depthwise_weight_grad` routes here the
2-D channels-last inputs (the summed tensor's channels contiguous). Its general kernel
(``_dwg_kernel``) keeps every tap of the kernel in one ``[taps, positions, channels]``
tile: a 7x7 kernel's 49 taps (64 padded) left 2 positions x 16 channels a step, and each
element's gather address was computed on its own. sm_90 SASS (Triton 3.9, f16, 7x7): 8
FMAs among ~500 instructions a step; on an H200 the held-out half's ``[32, 512, 14, 14]``
7x7 weight gradient took 620 us against cuDNN's 25 (``conv_heldout.py --profile``,
2026-11-28).

Here a program owns one row ``kh`` of the kernel's taps (``KW`` of them, padded to
``BLOCK_W``) for ``BLOCK_C`` channels and walks its share of the summed positions
``BLOCK_P`` at a time: a step loads the gathered tensor's ``[taps of the row, positions,
channels]`` tile (each (tap, position) one contiguous run of channels: 16-byte loads)
and the summed tensor's ``[positions, channels]`` tile, and adds their products into an
fp32 accumulator of the same shape, summed over positions once at the end. The bounds
are per (tap, position), computed on the ``[BLOCK_W, BLOCK_P]`` plane and broadcast
along the channels. The summed tile is loaded broadcast over the row's taps, in the
gathered tile's own layout: loaded as ``[positions, channels]`` and broadcast, Triton
would move it through shared memory between two barriers every step. The summed tensor
is read once for each of the kernel's rows (from L2).

The positions are split over programs as matmul's split-K where the rows and channel
tiles alone give too few programs; fp32 partials go to a workspace summed in a fixed
order by :func:`~opbench.kernels._lib.matmul_shared.sum_split_partials`, so the same
inputs give the same bits.

Only triton.language builtins inside the kernel (``tl.full``, no ``tl.zeros``; ``tl.reduce``
with the standard sum, no ``tl.sum``): ``conv_kernels``' docstring says why.
"""

from __future__ import annotations

import torch
import triton.language as tl

from opbench.kernels._lib.conv_depthwise import _sidx
from opbench.kernels._lib.conv_kernels import _idx, _unflatten
from opbench.kernels._lib.launch import Launcher, cdiv, jit_unspecialized, next_pow2
from opbench.kernels._lib.matmul import split_plan
from opbench.kernels._lib.matmul_shared import sm_count, split_target, sum_split_target
from opbench.kernels._lib.reduction_kernels import _SUM_COMBINE

__all__ = ["DWG_ROWS", "DWG_ROWS_BLOCK_C", "DWG_ROWS_TILE", "rows_blocks", "rows_weight_grad"]

#: Channels-last 2-D depthwise weight gradients through this kernel (else the general
#: ``_dwg_kernel``).
DWG_ROWS = True
#: Channels a program (a multiple of 8: one 16-byte f16 load), elements of its tile
#: (taps of a row x positions x channels; half as many in float32, whose compensation
#: takes as many registers again) and warps. Timed on an H200 (2026-11-28, Triton 3.6,
#: ``benchmarks/results/conv-cl-depthwise-h200-2026-11-28.md``): on the tuning half's
#: ``[32, 64, 56, 56]`` 3x3 row 1024 x 64 channels on 4 warps 0.21x eager's weight
#: gradient (4096 x 64 on 8 warps, the first guess: 0.15x; 2048: 0.15x; 1024 x 128: 0.21x);
#: held out, ``[32, 512, 14, 14]`` 7x7 0.14x (620 us -> 273 us; cuDNN 39 us). Like the
#: forward kernel, far from cuDNN: each program's few positions reuse little in L1.
DWG_ROWS_BLOCK_C = 64
DWG_ROWS_TILE = 1024
DWG_ROWS_WARPS = 4
#: Software-pipeline stages of the loop over position blocks (Triton's default): 1 and 3
#: the same on the H200 (``conv-cl-depthwise-h200-2026-11-28-stages.json``).
DWG_ROWS_STAGES = 3
#: Programs a multiprocessor the positions are split for (at least 8 steps each).
DWG_ROWS_PROGRAMS_PER_SM = 4

#: Integers Triton specializes (``== 1``, divisible by 16): the channel multiplier (1:
#: the gathered channels are the weight's rows, contiguous) and the channel count and
#: strides that prove a (tap, position)'s channels one aligned 16-byte run.
SPECIALIZED = ("C", "R_G", "as0", "as1", "as3", "as4", "bs0", "bs1", "bs3", "bs4")


@jit_unspecialized(keep=SPECIALIZED)
def _dwg_rows_kernel(
    a_ptr, b_ptr, dw_ptr,
    P: tl.int64, C: tl.int64, R_G: tl.int64, p_per_split: tl.int64, s_split: tl.int64,
    PH: tl.int64, PW: tl.int64, QH: tl.int64, QW: tl.int64,
    ph: tl.int64, pw: tl.int64, dh: tl.int64, dw: tl.int64,
    as0: tl.int64, as1: tl.int64, as3: tl.int64, as4: tl.int64,
    bs0: tl.int64, bs1: tl.int64, bs3: tl.int64, bs4: tl.int64,
    ws0: tl.int64, ws3: tl.int64, ws4: tl.int64,
    KW: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr, BIG: tl.constexpr,
    KAHAN: tl.constexpr, BLOCK_W: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr,
):  # fmt: skip
    """``dw[c, 0, kh, kw] = sum over batch and positions q of A[n, c, q] * B[n, c // R_G,
    q * stride - padding + (kh, kw) * dilation]`` (zero outside B) for the row ``kh`` of
    this program, ``c < C`` the weight's rows.

    Grid: (kernel rows, channel tiles, splits of the positions; ``p_per_split`` blocks of
    ``BLOCK_P`` each). Split partials (fp32) go to a workspace ``[splits, *dw]``,
    ``s_split`` apart. ``KAHAN`` (float32): each lane's running sum carries Kahan's
    compensation, as the general kernel's does."""
    kh = tl.program_id(0)
    pid_c = tl.program_id(1)
    split = tl.program_id(2)
    P, C, R_G = _idx(P, BIG), _sidx(C, BIG), _sidx(R_G, BIG)
    PH, PW, QH, QW = _idx(PH, BIG), _idx(PW, BIG), _idx(QH, BIG), _idx(QW, BIG)
    as0, as1, as3, as4 = _sidx(as0, BIG), _sidx(as1, BIG), _sidx(as3, BIG), _sidx(as4, BIG)
    bs0, bs1, bs3, bs4 = _sidx(bs0, BIG), _sidx(bs1, BIG), _sidx(bs3, BIG), _sidx(bs4, BIG)
    rc = _idx(pid_c, BIG) * BLOCK_C + tl.arange(0, BLOCK_C)
    c_ok = rc < C
    rw = tl.arange(0, BLOCK_W)
    w_ok = rw < KW
    eh = _idx(kh, BIG) * _idx(dh, BIG) - _idx(ph, BIG)  # the row's offset along H
    ew = _idx(rw, BIG) * _idx(dw, BIG) - _idx(pw, BIG)  # [W]: each tap's along W
    a_chan = (rc * as1)[None, None, :]
    b_chan = ((rc // R_G) * bs1)[None, None, :]
    cw_ok = w_ok[:, None, None] & c_ok[None, None, :]  # [W, 1, C]
    p_lo = split * _idx(p_per_split, BIG) * BLOCK_P
    acc = tl.full([BLOCK_W, BLOCK_P, BLOCK_C], 0, tl.float32)
    comp = acc
    for i in range(0, _idx(p_per_split, BIG)):  # a count: see matmul's K loop
        p = p_lo + i * BLOCK_P + tl.arange(0, BLOCK_P)
        p_ok = p < P
        nb, _qd, qh, qw = _unflatten(p, 1, QH, QW)
        ih = qh * SH + eh  # [P]
        iw = (qw * SW)[None, :] + ew[:, None]  # [W, P]
        ok = (p_ok & (ih >= 0) & (ih < PH))[None, :] & (iw >= 0) & (iw < PW)  # [W, P]
        b_pos = (nb * bs0 + ih * bs3)[None, :] + iw * bs4  # [W, P]
        a_pos = nb * as0 + qh * as3 + qw * as4  # [P]
        # A broadcast over the row's taps as loaded: its tile's layout is B's (see above)
        a_ptrs = tl.broadcast_to(a_ptr + a_pos[None, :, None] + a_chan, [BLOCK_W, BLOCK_P, BLOCK_C])
        a_ok = tl.broadcast_to(
            p_ok[None, :, None] & c_ok[None, None, :], [BLOCK_W, BLOCK_P, BLOCK_C]
        )
        a = tl.load(a_ptrs, mask=a_ok, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + b_pos[:, :, None] + b_chan, mask=ok[:, :, None] & cw_ok,
                    other=0.0).to(tl.float32)  # fmt: skip
        if KAHAN:
            y = b * a - comp
            t = acc + y
            # no compensation once the sum is Inf (Inf - Inf would make it NaN)
            comp = tl.where((t - t) == 0, (t - acc) - y, 0.0)
            acc = t
        else:
            acc += b * a
    part = tl.reduce(acc, 1, _SUM_COMBINE)  # [W, C]
    offs = (
        (rc * _idx(ws0, BIG))[None, :]
        + _idx(kh, BIG) * _idx(ws3, BIG)
        + (_idx(rw, BIG) * _idx(ws4, BIG))[:, None]
    )
    tl.store(dw_ptr + split * _idx(s_split, BIG) + offs, part.to(dw_ptr.dtype.element_ty),
             mask=w_ok[:, None] & c_ok[None, :])  # fmt: skip


_dwg_rows = Launcher(_dwg_rows_kernel, specialize=SPECIALIZED)


def rows_blocks(kw: int, channels: int, tile: int = DWG_ROWS_TILE) -> tuple[int, int, int]:
    """(BLOCK_W, BLOCK_P, BLOCK_C): a row's ``kw`` taps rounded up to a power of two,
    :data:`DWG_ROWS_BLOCK_C` channels (fewer where there are fewer, at least 8), and as
    many positions as the ``tile`` leaves (at least 1)."""
    bw = next_pow2(kw)
    bc = max(8, min(DWG_ROWS_BLOCK_C, next_pow2(channels)))
    return bw, max(1, tile // (bw * bc)), bc


def rows_splits(tiles: int, iters: int, sms: int) -> int:
    """Programs along the positions for ``tiles`` (kernel rows x channel tiles) over
    ``iters`` position blocks on ``sms`` multiprocessors: :data:`DWG_ROWS_PROGRAMS_PER_SM`
    programs a multiprocessor in all, each at least 8 blocks, at most 256 splits; 1
    where the tiles alone fill the GPU."""
    if iters < 16:
        return 1
    return max(1, min(iters // 8, cdiv(DWG_ROWS_PROGRAMS_PER_SM * sms, tiles), 256))


def rows_weight_grad(
    a5: torch.Tensor, b5: torch.Tensor, dw: torch.Tensor, w5: torch.Tensor, r_g: int,
    stride: tuple[int, int], padding: tuple[int, int], dilation: tuple[int, int], big: bool,
) -> None:  # fmt: skip
    """``dw`` (``w5`` its 5-D view, ``[C, 1, 1, KH, KW]``) from the 5-D ``a5`` (summed,
    ``[N, C, 1, QH, QW]``) and ``b5`` (gathered, ``[N, C / r_g, 1, PH, PW]``), both
    channels-last, through :func:`_dwg_rows_kernel` (2-D ``stride``, ``padding``,
    ``dilation``; ``big``: 64-bit offsets)."""
    QH, QW = a5.shape[3:]
    PH, PW = b5.shape[3:]
    KH, KW = w5.shape[3:]
    C = w5.shape[0]
    P = a5.shape[0] * QH * QW
    kahan = a5.dtype == torch.float32
    bw, bp, bc = rows_blocks(KW, C, DWG_ROWS_TILE // 2 if kahan else DWG_ROWS_TILE)
    tiles = KH * cdiv(C, bc)
    iters = cdiv(P, bp)
    splits, per = split_plan(
        tiles, iters, dw.device, rows_splits(tiles, iters, sm_count(dw.device))
    )
    target = split_target(dw, splits)
    as0, as1, _, as3, as4 = a5.stride()
    bs0, bs1, _, bs3, bs4 = b5.stride()
    _dwg_rows(
        (KH, cdiv(C, bc), splits),
        (a5, b5, target, P, C, r_g, per, dw.numel() if splits > 1 else 0,
         PH, PW, QH, QW, padding[0], padding[1], dilation[0], dilation[1],
         as0, as1, as3, as4, bs0, bs1, bs3, bs4, w5.stride(0), w5.stride(3), w5.stride(4)),
        KW=KW, SH=stride[0], SW=stride[1], BIG=big, KAHAN=kahan,
        BLOCK_W=bw, BLOCK_P=bp, BLOCK_C=bc, num_warps=DWG_ROWS_WARPS, num_stages=DWG_ROWS_STAGES,
    )  # fmt: skip
    sum_split_target(target, dw)
