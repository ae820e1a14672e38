"""The weight gradient of a channels-last depthwise convolution as a walk down the rows:
a program owns one kernel row's taps for a block of channels and a share of the output
rows, loads each output row of the summed tensor once and the input row it meets under
that kernel row as ``KW`` column-shifted tiles, and adds their products into ``KW``
accumulators (``[columns, channels]`` each), summed over the columns once at the end.

Why: :mod:`~opbench.kernels._lib.conv_depthwise_wgrad_rows` (the tap-row kernel, the
route for channels-last planes before this one) steps 2 positions at a time through a
``[taps, positions, channels]`` tile, and on the H200 ran the held-out ``[32, 512, 14,
14]`` 7x7 weight gradient (ConvNeXt's) in 250 us against cuDNN's 25
(``nhwc-bk-phases-h200-2026-12-02-top20.md``, its furthest-behind table). Here a step is
a whole output row of ``BLOCK_W`` columns: ``1 + KW`` tile loads of ``[BLOCK_W,
BLOCK_C]`` (16-byte runs of channels) and ``KW`` tile products.

Served (:func:`cl_walk_weight_grad` says which calls): 2-D channels-last tensors (both
channel strides 1), 16-bit (float32 keeps the tap-row kernel's Kahan sums), one gathered
channel a weight row (no multiplier), unit stride and dilation, kernels at most 7 wide,
outputs at most :data:`DWG_CL_WALK_MAX_W` wide (a row a tile). On (:data:`DWG_CL_WALK`)
since a device-time A/B against the tap-row kernel (H200, 2026-12-02,
``dw-cl-rows-cl-h200-2026-12-02.md``): the tuning half's one backward row it serves
1.34x alone, 1.46x with the forward walk serving the input gradient; held out 12 rows
1.87x and 2.34x (ConvNeXt's ``[32, 512, 14, 14]`` 7x7 backward 0.26x -> 0.80x eager).

The rows are split over programs where kernel rows x channel tiles give too few; fp32
partials go to a workspace summed in a fixed order
(:func:`~opbench.kernels._lib.matmul_shared.sum_split_target`), so the same inputs give
the same bits. Only triton.language builtins inside the kernel: ``conv_kernels``'
docstring says why.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from opbench.kernels._lib.channels_last_copy import channels_last_5d
from opbench.kernels._lib.conv_kernels import _idx
from opbench.kernels._lib.launch import INTERPRETING, Launcher, cdiv, jit_unspecialized, next_pow2
from opbench.kernels._lib.matmul import split_plan
from opbench.kernels._lib.matmul_shared import split_target, sum_split_target
from opbench.kernels._lib.proven import common_power_of_two, multiple, multiples
from opbench.kernels._lib.reduction_kernels import _SUM_COMBINE

__all__ = [
    "DWG_CL_WALK", "DWG_CL_WALK_ALIGN_RUNS", "DWG_CL_WALK_BLOCK_C", "DWG_CL_WALK_MAX_W",
    "DWG_CL_WALK_MIXED", "DWG_CL_WALK_STAGES", "DWG_CL_WALK_THREAD_ELEMS",
    "cl_walk_fits", "cl_walk_mixed_weight_grad", "cl_walk_warps", "cl_walk_weight_grad",
]  # fmt: skip

_INTERPRETING = INTERPRETING

#: Whether :func:`cl_walk_weight_grad` serves the calls it can. On since its A/B (the
#: module docstring).
DWG_CL_WALK = True
#: Channels a program; widest output row served (a row is one tile of its columns).
#: Untimed first choices, read from the sm_90 code on the CPU machine (Triton 3.9,
#: ``kernel_ptx.py --sass``, 7 taps a row, 16 columns): 64 channels on 4 warps load
#: 16-byte runs, 8 loads a step, 126 registers and no spill (32 channels: 8-byte loads,
#: 80 registers).
DWG_CL_WALK_BLOCK_C = 64
DWG_CL_WALK_MAX_W = 64
DWG_CL_WALK_WARPS = 4
#: Elements of a ``[BLOCK_W, BLOCK_C]`` tile a thread holds, which sets the warps a
#: program has (1 to 8) in place of :data:`DWG_CL_WALK_WARPS`; None: that fixed count.
#: Why: the ``KW`` accumulators are tiles, so registers grow with the tile a thread holds:
#: a 56-wide row (64 columns x 32 channels) on 4 warps took 231 registers (2 programs, 8
#: warps an SM), on 8 warps 124 (16 warps an SM); the 14-wide rows' 16 x 64 tile takes
#: 126 on 4 (sm_90 code, ``kernel_ptx.py --sass``, 7 taps, Triton 3.9, 2026-12-02). The
#: wide rows are the slow ones (CoaT's and ConvNeXt's 56-wide weight gradients 1,024 and
#: 400 us against cuDNN's 70 and 71, H200: a loop that waits on its loads). 8 keeps the
#: 14-wide rows at 4 warps and gives the 56-wide ones 8. Timed on the H200 (2026-12-02,
#: ``conv_pending.sh`` step 9, 12 most used depthwise backward rows of each half made
#: channels-last, device time): 1.078x as fast as 4 fixed warps on the tuning half with
#: channel runs on (0.999x held out; 1.948x / 2.56x with them off), so 8; with a fill of
#: 1,056 programs as well 1.076x (0.909x held out): not taken.
DWG_CL_WALK_THREAD_ELEMS: int | None = 8
#: Whether the channel count and both tensors' position strides reach the kernel restated
#: as multiples of the largest of 8, 4, 2 they share (``proven.multiple``), as the
#: forward walk's :data:`~opbench.kernels._lib.conv_depthwise_cl_rows.DW_CL_ROWS_ALIGN_RUNS`
#: does and for the same reason: 24 channels (CoaT's) compiled a 7-tap step's loads to
#: 128 ``ld.global.b16`` on 255 registers, 16 channels' multiples to 16 16-byte ones
#: (64 x 32 tile, 4 warps; sm_90 code read on the CPU). On since the H200 timed it
#: (2026-12-02, ``conv_pending.sh`` step 9): 2.631x as fast on the tuning half (2.599x
#: held out); the tuning half's ``[16, 216, 42, 42]`` 3x3 weight gradient 1,974 -> 60 us
#: (cuDNN 38), the held-out ``[16, 168, 42, 42]`` 5x5 4,030 -> 99 (49); against the new
#: defaults, off reads 0.369x (0.372x): ``dwg-cl-walk-settings-h200-2026-12-02``,
#: ``dwg-cl-walk-defaults-h200-2026-12-02`` in ``benchmarks/results``.
DWG_CL_WALK_ALIGN_RUNS = True
#: Stages of the walk's loop over output rows (``tl.range(num_stages=...)``; 1: a plain
#: loop, which Triton does not pipeline: each row's 8 tile loads are waited on before its
#: products, the latency-bound loop of the module docstring's slow rows). At 2 or 3 the
#: tiles come through ``cp.async`` one or two rows ahead (sm_90 code read on the CPU).
#: Timed on the H200 (2026-12-02, step 9): 2 stages 0.944x the plain loop's speed on the
#: tuning half, 3 stages 1.028x with runs off and 0.981x with them on (1.033x held out):
#: off.
DWG_CL_WALK_STAGES = 1
#: Fewest programs the grid should have (twice an H200's SMs): the rows are split until
#: it has them, each split at least :data:`DWG_CL_WALK_MIN_ROWS` rows. 1,056 ran 1.124x as
#: fast on the tuning half with runs off, 1.051x with them on but 0.932x held out (H200,
#: 2026-12-02); 32 channels a program 0.982x (0.972x): neither taken.
DWG_CL_WALK_MIN_PROGRAMS = 264
DWG_CL_WALK_MIN_ROWS = 8
#: Whether a call whose gathered tensor (the input) is channels-last and whose summed one
#: (``grad_output``) is not copies the summed one to channels-last and walks
#: (:func:`cl_walk_mixed_weight_grad`). Why: such calls (Twins' blocks: a channels-last
#: input, a contiguous ``grad_output``) went to the NCHW tensor-core weight gradient,
#: which walks positions where this input's channels are the contiguous side: the tuning half's
#: ``[32, 64, 56, 56]`` 3x3 took 212 us against cuDNN's 21 (0.48x eager for the whole
#: backward; H200, 2026-12-02, ``dw-cl-rows-cl-h200-2026-12-02-defaults.json``), where the
#: copy moves 12.8 MB (about 8 us) and the walk serves the channels-last ``[32, 64, 56,
#: 56]`` in a few tens of us. On since ``conv_pending.sh`` step 7 (H200, 2026-12-02,
#: ``dw-cl-rows-cl-h200-2026-12-02-mixed.md``): the tuning half's 3 such backward rows
#: 2.19x faster by device time (``[32, 64, 56, 56]`` 223 -> 71 us, eager 113;
#: ``[32, 128, 28, 28]`` 85 -> 42, eager 46; ``[32, 320, 14, 14]`` 59 -> 35, eager 60);
#: every other row of both halves launched as before (held out: none has these layouts).
DWG_CL_WALK_MIXED = True


@triton.jit
def _shifted(row_ptr, q, pw, kw, W, ok, c, xs4):
    """The gathered row's ``[BLOCK_W, BLOCK_C]`` tile at column shift ``kw``, fp32, zeros
    outside it (``ok``: the row and channel mask)."""
    iw = q - pw + kw
    m = ((iw >= 0) & (iw < W))[:, None] & ok
    return tl.load(row_ptr + (iw * xs4)[:, None] + c[None, :], mask=m, other=0.0).to(tl.float32)


@triton.jit
def _column_sum(acc):
    return tl.reduce(acc, 0, _SUM_COMBINE)


@jit_unspecialized(keep=("C", "as0", "as3", "as4", "bs0", "bs3", "bs4"))
def _dwg_cl_walk_kernel(
    a_ptr, b_ptr, dw_ptr,
    C: tl.int64, QH: tl.int64, QW: tl.int64, PH: tl.int64, PW: tl.int64,
    ph: tl.int64, pw: tl.int64, rows: tl.int64, rows_per_split: tl.int64, s_split: tl.int64,
    as0: tl.int64, as3: tl.int64, as4: tl.int64, bs0: tl.int64, bs3: tl.int64, bs4: tl.int64,
    ws0: tl.int64, ws3: tl.int64, ws4: tl.int64,
    KW: tl.constexpr, BIG: tl.constexpr, BLOCK_W: tl.constexpr, BLOCK_C: tl.constexpr,
    ALIGN: tl.constexpr, STAGES: tl.constexpr,
):  # fmt: skip
    """``dw[c, 0, kh, kw] = sum over images n and output positions (o, q) of
    a[n, o, q, c] * b[n, o - ph + kh, q - pw + kw, c]`` (zero outside ``b``), both
    channels-last, for this program's kernel row ``kh`` and channels, over its split's
    output rows ``t = n * QH + o``. Grid: (kernel rows, channel tiles, splits).
    ``ALIGN``: ``C`` and the position strides are multiples of it (1: unknown)."""
    kh = _idx(tl.program_id(0), BIG)
    pid_c = tl.program_id(1)
    split = _idx(tl.program_id(2), BIG)
    C, QH, QW = multiple(_idx(C, BIG), ALIGN), _idx(QH, BIG), _idx(QW, BIG)
    PH, PW, ph, pw = _idx(PH, BIG), _idx(PW, BIG), _idx(ph, BIG), _idx(pw, BIG)
    # the host's proof (ALIGN divides them), in a form Triton reads
    as0, as3, as4 = multiples(_idx(as0, BIG), _idx(as3, BIG), _idx(as4, BIG), ALIGN)
    bs0, bs3, bs4 = multiples(_idx(bs0, BIG), _idx(bs3, BIG), _idx(bs4, BIG), ALIGN)
    c = _idx(pid_c, BIG) * BLOCK_C + tl.arange(0, BLOCK_C)
    c_ok = c < C
    q = tl.arange(0, BLOCK_W)
    qc_ok = (q < QW)[:, None] & c_ok[None, :]
    a_cols = (q * as4)[:, None] + c[None, :]
    zero = tl.full([BLOCK_W, BLOCK_C], 0, tl.float32)
    acc0, acc1, acc2, acc3, acc4, acc5, acc6 = zero, zero, zero, zero, zero, zero, zero
    first = split * _idx(rows_per_split, BIG)
    last = tl.minimum(first + _idx(rows_per_split, BIG), _idx(rows, BIG))
    for t in tl.range(first, last, num_stages=STAGES):
        n = t // QH
        o = t - n * QH
        a = tl.load(a_ptr + n * as0 + o * as3 + a_cols, mask=qc_ok, other=0.0).to(tl.float32)
        ih = o - ph + kh
        # the row as a [1, 1] tile: the interpreter's AND of a tile and a scalar bool is int32
        rr = tl.full([1, 1], 0, ph.dtype) + ih
        ok = c_ok[None, :] & (rr >= 0) & (rr < PH)
        row = b_ptr + n * bs0 + ih * bs3
        acc0 += a * _shifted(row, q, pw, 0, PW, ok, c, bs4)
        if KW > 1:
            acc1 += a * _shifted(row, q, pw, 1, PW, ok, c, bs4)
        if KW > 2:
            acc2 += a * _shifted(row, q, pw, 2, PW, ok, c, bs4)
        if KW > 3:
            acc3 += a * _shifted(row, q, pw, 3, PW, ok, c, bs4)
        if KW > 4:
            acc4 += a * _shifted(row, q, pw, 4, PW, ok, c, bs4)
        if KW > 5:
            acc5 += a * _shifted(row, q, pw, 5, PW, ok, c, bs4)
        if KW > 6:
            acc6 += a * _shifted(row, q, pw, 6, PW, ok, c, bs4)
    out = dw_ptr + split * _idx(s_split, BIG) + c * _idx(ws0, BIG) + kh * _idx(ws3, BIG)
    ws4 = _idx(ws4, BIG)
    ty = dw_ptr.dtype.element_ty
    tl.store(out, _column_sum(acc0).to(ty), mask=c_ok)
    if KW > 1:
        tl.store(out + ws4, _column_sum(acc1).to(ty), mask=c_ok)
    if KW > 2:
        tl.store(out + 2 * ws4, _column_sum(acc2).to(ty), mask=c_ok)
    if KW > 3:
        tl.store(out + 3 * ws4, _column_sum(acc3).to(ty), mask=c_ok)
    if KW > 4:
        tl.store(out + 4 * ws4, _column_sum(acc4).to(ty), mask=c_ok)
    if KW > 5:
        tl.store(out + 5 * ws4, _column_sum(acc5).to(ty), mask=c_ok)
    if KW > 6:
        tl.store(out + 6 * ws4, _column_sum(acc6).to(ty), mask=c_ok)


_dwg_cl_walk = Launcher(
    _dwg_cl_walk_kernel, specialize=("C", "as0", "as3", "as4", "bs0", "bs3", "bs4")
)


def cl_walk_splits(tiles: int, rows: int) -> int:
    """Programs along the output rows for ``tiles`` (kernel rows x channel tiles): enough
    for :data:`DWG_CL_WALK_MIN_PROGRAMS` in all, each at least
    :data:`DWG_CL_WALK_MIN_ROWS` rows; one program for all of them under the interpreter."""
    if _INTERPRETING:
        return 1
    return max(1, min(cdiv(DWG_CL_WALK_MIN_PROGRAMS, tiles), rows // DWG_CL_WALK_MIN_ROWS))


def cl_walk_warps(block_w: int, block_c: int) -> int:
    """Warps of a program over a ``[block_w, block_c]`` tile: :data:`DWG_CL_WALK_WARPS`,
    or with :data:`DWG_CL_WALK_THREAD_ELEMS` set, as many as hold that many elements a
    thread (a power of two: the tile's sides are), 1 to 8."""
    if DWG_CL_WALK_THREAD_ELEMS is None:
        return DWG_CL_WALK_WARPS
    return max(1, min(8, block_w * block_c // (32 * DWG_CL_WALK_THREAD_ELEMS)))


def cl_walk_fits(
    a5: torch.Tensor, b5: torch.Tensor, w5: torch.Tensor, r_g: int, stride: tuple[int, int],
    dilation: tuple[int, int],
) -> bool:  # fmt: skip
    """Whether the walk serves the call's shapes, dtype and settings, whatever its
    tensors' layouts (:func:`cl_walk_weight_grad` also wants both channels-last)."""
    N, C, QD, QH, QW = a5.shape
    PD = b5.shape[2]
    KD, _, KW = w5.shape[2:]
    return (
        DWG_CL_WALK and r_g == 1 and C > 1 and QD == 1 and PD == 1 and KD == 1 and KW <= 7
        and tuple(stride) == (1, 1) and tuple(dilation) == (1, 1)
        and a5.dtype in (torch.float16, torch.bfloat16) and b5.shape[1] == C
        and QW <= DWG_CL_WALK_MAX_W and N * QH * QW > 0
    )  # fmt: skip


def cl_walk_mixed_weight_grad(
    a5: torch.Tensor, b5: torch.Tensor, dw: torch.Tensor, w5: torch.Tensor, r_g: int,
    stride: tuple[int, int], padding: tuple[int, int], dilation: tuple[int, int], big: bool,
) -> bool:  # fmt: skip
    """:func:`cl_walk_weight_grad` for a channels-last ``b5`` (the input) beside a summed
    ``a5`` whose channels are not contiguous: ``a5`` copied to channels-last first
    (:func:`~opbench.kernels._lib.channels_last_copy.channels_last_5d`, shared with the
    input gradient inside a backward). False, nothing copied, where
    :data:`DWG_CL_WALK_MIXED` is off or the walk would not serve the call."""
    if not (DWG_CL_WALK_MIXED and b5.stride(1) == 1 and a5.stride(1) != 1
            and cl_walk_fits(a5, b5, w5, r_g, stride, dilation)):  # fmt: skip
        return False
    _walk(channels_last_5d(a5), b5, dw, w5, padding, big)
    return True


def cl_walk_weight_grad(
    a5: torch.Tensor, b5: torch.Tensor, dw: torch.Tensor, w5: torch.Tensor, r_g: int,
    stride: tuple[int, int], padding: tuple[int, int], dilation: tuple[int, int], big: bool,
) -> bool:  # fmt: skip
    """``dw`` (``w5`` its 5-D view, ``[C, 1, 1, KH, KW]``) from the 5-D ``a5`` (summed,
    ``[N, C, 1, QH, QW]``) and ``b5`` (gathered, ``[N, C, 1, PH, PW]``), both
    channels-last, through :func:`_dwg_cl_walk_kernel`; False where it does not serve the
    call (the module docstring) or :data:`DWG_CL_WALK` is off."""
    if not (a5.stride(1) == 1 and b5.stride(1) == 1
            and cl_walk_fits(a5, b5, w5, r_g, stride, dilation)):  # fmt: skip
        return False
    _walk(a5, b5, dw, w5, padding, big)
    return True


def _walk(a5: torch.Tensor, b5: torch.Tensor, dw: torch.Tensor, w5: torch.Tensor,
          padding: tuple[int, int], big: bool) -> None:  # fmt: skip
    """Launch the walk (and its split sum) on a call both entries have checked."""
    N, C, QD, QH, QW = a5.shape
    PD, PH, PW = b5.shape[2:]
    KD, KH, KW = w5.shape[2:]
    bw = next_pow2(QW)
    bc = next_pow2(C) if _INTERPRETING else min(DWG_CL_WALK_BLOCK_C, next_pow2(C))
    tiles = KH * cdiv(C, bc)
    rows = N * QH
    splits, per = split_plan(tiles, rows, dw.device, cl_walk_splits(tiles, rows))
    target = split_target(dw, splits)
    as0, _, _, as3, as4 = a5.stride()
    bs0, _, _, bs3, bs4 = b5.stride()
    align = common_power_of_two(C, as0, as3, as4, bs0, bs3, bs4) if DWG_CL_WALK_ALIGN_RUNS else 1
    _dwg_cl_walk(
        (KH, cdiv(C, bc), splits),
        (a5, b5, target, C, QH, QW, PH, PW, padding[0], padding[1], rows, per,
         dw.numel() if splits > 1 else 0, as0, as3, as4, bs0, bs3, bs4,
         w5.stride(0), w5.stride(3), w5.stride(4)),
        KW=KW, BIG=big, BLOCK_W=bw, BLOCK_C=bc, ALIGN=align, STAGES=DWG_CL_WALK_STAGES,
        num_warps=cl_walk_warps(bw, bc),
    )  # fmt: skip
    sum_split_target(target, dw)
