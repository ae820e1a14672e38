"""Dense convolutions as a pipelined implicit GEMM over channels-last data.

:mod:`opbench.kernels._lib.conv_kernels`' implicit GEMM reads any strides, so over NCHW
inputs each step gathers ``[channels, positions]`` tiles whose positions are shifted by
the kernel position: 2-byte loads that neither vectorize nor go through ``cp.async``,
one synchronous gather a step (``CONV_STAGES = 1``). On the H100 it ran the traced 3x3
convolutions at 0.09-0.30x cuDNN on both halves of the traces (23 TFLOP/s on
``[64, 256, 14, 14]`` x ``[256, 256, 3, 3]``, cuDNN 264;
``benchmarks/results/conv-heldout-h100-2026-11-28.md``).

Here the input is read channels-last (``[N, D, H, W, C]``, copied once if it is not by
:mod:`~opbench.kernels._lib.channels_last_copy`: one pass over the input, small beside a
GEMM that reads every element once per kernel position) and the weight packed once per call as ``[groups, taps, C_in/g, C_out/g]``
with its columns padded to the tile, so both operands of every step are rows of
contiguous 16-byte-aligned elements: the A tile ``[BLOCK_M positions, BLOCK_K channels]``
is one row gather per position, the B tile a dense block, and the loop over
(kernel position, channel block) is a single loop Triton software-pipelines
(``NHWC_STAGES``). Rows whose position falls in the padding are masked to zero; the
output is written through its strides in the memory format eager picks (NCHW outputs
with a position-contiguity hint so the stores coalesce).

A unit-stride transposed convolution (every input gradient of a stride-1 convolution)
is the forward convolution of the flipped, transposed weight with padding
``dilation * (k - 1) - padding``; packing the weight does the flip and transposition
for free. A strided one (unit dilation) splits its output into phases (``o mod stride``
in each dim): the rows of one phase read the same taps, so a program of one phase runs
a dense product over just those (``PHASED``, ``NHWC_STRIDED_TRANSPOSED``: on since
timed, 2.5x on the rows it serves); a dilated one stays on ``conv_kernels``.

Measured (H100, 2026-11-28, ``conv-heldout-nhwc-h100-2026-11-28.md``, device time): the
rows it serves at 0.646x eager on the held-out half of the traces and 0.844x on the tuning
half (the same rows before: 0.172x, 0.329x); ``[64, 256, 14, 14]`` x ``[256, 256, 3, 3]``
in 44 us of GEMM (336 TFLOP/s) + 18 us of transpose against cuDNN's 45 us.

Few output tiles (a small batch) split the reduction over programs as matmul's split-K
(:func:`~opbench.kernels._lib.matmul.split_plan`), fp32 partials summed in a fixed order.

Only triton.language builtins inside the kernel: ``conv_kernels``' docstring says why.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
import triton.language as tl

from opbench.kernels._lib.channels_last_copy import channels_last_5d, channels_last_strides
from opbench.kernels._lib.conv_kernels import _idx, _kpos, _unflatten
from opbench.kernels._lib.launch import INTERPRETING as _INTERPRETING
from opbench.kernels._lib.launch import Launcher, cdiv, jit_unspecialized, next_pow2
from opbench.kernels._lib.matmul import split_plan
from opbench.kernels._lib.matmul_shared import dot_acc, split_target, sum_split_target
from opbench.kernels._lib.proven import multiple, row_alignment

__all__ = ["NHWC_MIN_CIN", "nhwc_blocks", "nhwc_convolution"]


#: Fewest input channels a group needs for this path: below it ``conv_smallk`` (NCHW,
#: the reduction flattened over channels and taps) serves, which ran 3x3 convolutions of
#: 18-36 channels at 1.1-2.3x eager on the H100 and of 56-104 at 0.1-0.4x
#: (``conv-heldout-h100-2026-11-28.md``). 48, timed on device time on an H200
#: (``conv-heldout-fwd-mincin-h200-2026-11-28.md``, the tuning half): 32 took
#: ``[128, 36, 28, 28]`` from 1.17x to 0.38x eager, 16 took ``[128, 18, 56, 56]`` from 1.86x
#: to 0.48x too; the held-out half has no row between 16 and 48 channels (0.755 against 0.756).
NHWC_MIN_CIN = 48
#: Tiles: ``BLOCK_M`` output positions x ``BLOCK_N`` of a group's output channels (at
#: most ``NHWC_BLOCK_N``, at least 16) x ``BLOCK_K`` input channels a step (at most
#: ``NHWC_BLOCK_K``: :func:`nhwc_block_k`).
#: First choices (Triton's Hopper matmul tutorial's 128x128x64, 8 warps, 3 stages). The
#: H100 sweep of 2026-11-28 (``conv-nhwc-h100-2026-11-28-sweep.md``: 128x256, 64-row
#: tiles, 32-channel steps at 4 stages) was read through ``do_bench`` around whole calls,
#: which host time dominated, so it picked nothing; compare variants on device time
#: (``conv_heldout.py --profile --variant``) before changing them.
NHWC_BLOCK_M = 128
NHWC_BLOCK_N = 128
NHWC_BLOCK_K = 64
NHWC_WARPS = 8
NHWC_STAGES = 3
#: Channel counts no step divides take a step that pads them little (:func:`nhwc_block_k`);
#: off, the smallest power of two past them, at most ``NHWC_BLOCK_K`` (the rule before
#: 2026-12-01, kept to time the two against each other as a ``conv_heldout.py`` variant).
NHWC_BLOCK_K_LEAST_PADDING = True
#: Whether channel counts that are multiples of 8 take the largest step that pads them by
#: at most a quarter even where a smaller step divides them (208 channels: 64-channel
#: steps padded to 256, not 13 exact 16-channel ones). Why: a 16-channel step is a
#: ``128 x 128 x 16`` product, too short to hide a step's loads, and multiples of 8 keep
#: a padded step's channel mask constant over 16-byte vectors (``X_ALIGN``); the 36
#: channels that timed 16-channel steps best (:func:`nhwc_block_k`) are no multiple of 8.
#: The held-out ``[64, 208, 7, 7]`` stride-2 input gradient ran its GEMM at 19 TFLOP/s in
#: 16-channel steps (126 us; H200, 2026-12-02, ``nhwc-wgrad-strided-variants-h200-2026-12-02``).
#: On since the device-time A/B on the tuning half (H200, 2026-12-02,
#: ``nhwc-bk-phases-h200-2026-12-02-*``): the 25 most used strided backward rows, 2
#: changed, 1.42x; the 20 most used of each op, 1 forward row 1.125x, 1 backward 1.051x;
#: the rows it left alone 0.999-1.001x. Held out, judged after: 1 strided row 1.67x.
NHWC_BLOCK_K_ALIGNED_LARGEST = True
#: Whether a phased convolution's split of the reduction counts every phase's tiles (its
#: grid holds ``tiles x phases`` programs) rather than one phase's: counting one, the
#: ``[64, 208, 7, 7]`` stride-2 input gradient's 50 tiles (200 programs with the 4
#: phases) split 5 ways and wrote 5 fp32 copies of the gradient (a 24.8 us sum kernel
#: beside a 126 us GEMM; H200, 2026-12-02). On since the same A/B: the tuning half's 2
#: strided backward rows it changes 1.42x (with the step rule above, 1.53x); held out,
#: judged after, 2 rows 1.42x (both: 1.49x).
NHWC_SPLIT_COUNTS_PHASES = True
#: Whether the activation's rows may be 4- or 2-element aligned (``X_ALIGN`` the largest
#: of 8, 4, 2, 1 dividing every stride and the group's channels) rather than 8 or else 1.
#: Why: channel counts no multiple of 8 (18, 36, 52, 116: HRNet's and RegNet's) left the
#: A operand's loads 2-byte and synchronous (sm_90 PTX of a phased 3x3 stride-2 tile: 32
#: ``ld.global.b16`` a step); aligned to 4 they are 8-byte ``cp.async`` (24 a step), to
#: 2 4-byte ones (48), pipelined like the 16-byte ones (``test_kernel_ptx.py``). The
#: held-out ``[64, 52, 28, 28]`` stride-2 input gradient's GEMM ran at 5.6 TFLOP/s (434 us;
#: cuDNN's 29; H200, 2026-12-02, ``nhwc-bk-phases-h200-2026-12-02-strided.json``). On
#: since the A/B with :data:`~opbench.kernels._lib.conv_nhwc_wgrad.NHWC_WGRAD_ALIGN_PARTIAL`
#: (H200, 2026-12-02, device time, ``align-partial-strided-h200-2026-12-02.md``): the
#: tuning half's 3 strided backward rows it changes 1.52x (18 and 36 channels), held out
#: the one 2.55x (that row 0.45x -> 1.16x eager); the 20 most used rows of each op
#: unchanged (``align-partial-h200-2026-12-02.md``).
NHWC_X_ALIGN_PARTIAL = True
#: Strided transposed convolutions of unit dilation (the input gradients of strided
#: convolutions) through the kernel's ``PHASED`` mode, a phase of the output a program;
#: off, the general kernel (``conv_kernels``) serves them, every tap of every output
#: position tried and masked. Judged on device time on an H200 (2026-12-01,
#: ``conv-heldout-strided-bwd-h200-2026-12-01.md``: the 25 most used strided backward
#: rows of each half, ``--variant phased=...``): the 11 rows of each half it changes ran
#: 2.48x (held out) and 2.74x (tuning) faster, the 14 it left alone 0.997-1.000x; the
#: held-out rows' backward 0.347x -> 0.517x eager. ``[32, 320, 7, 7]``'s 2x2 stride-2
#: input gradient: 284 -> ~100 us of kernel (cuDNN's whole backward: 38).
NHWC_STRIDED_TRANSPOSED = True
#: Fewest channels a group a phased convolution needs here. Not :data:`NHWC_MIN_CIN`:
#: that floor hands few channels to ``conv_smallk``, which declines strided transposed
#: convolutions, so below it they fell to the general kernel (the held-out ``[128, 64,
#: 28, 28]`` groups-of-8 stride-2 input gradient: 1,092 us, eager's whole backward 291).
NHWC_MIN_CIN_PHASED = 1


@jit_unspecialized
def _nhwc_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr,
    M: tl.int64, CIN_G: tl.int64, COUT_G: tl.int64, W_ROW: tl.int64, GROUPS: tl.int64,
    D: tl.int64, H: tl.int64, W: tl.int64, OD: tl.int64, OH: tl.int64, OW: tl.int64,
    pd: tl.int64, ph: tl.int64, pw: tl.int64, dd: tl.int64, dh: tl.int64, dw: tl.int64,
    xs0: tl.int64, xs2: tl.int64, xs3: tl.int64, xs4: tl.int64,
    ys0: tl.int64, ys1: tl.int64, ys2: tl.int64, ys3: tl.int64, ys4: tl.int64,
    steps_per_split: tl.int64, s_split: tl.int64, ROD: tl.int64, ROH: tl.int64, ROW: tl.int64,
    KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr,
    SD: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
    HAS_D: tl.constexpr, HAS_BIAS: tl.constexpr, IEEE: tl.constexpr, TO_F32: tl.constexpr,
    BIG: tl.constexpr, X_ALIGN: tl.constexpr, EVEN_K: tl.constexpr, Y_VEC: tl.constexpr,
    SPLIT: tl.constexpr, PHASED: tl.constexpr, FLIP_W: tl.constexpr, Y_CVEC: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    """``y[m, g*COUT_G + n] = sum over taps t and channels c of
    x[m moved by t, g*CIN_G + c] * w[g, t, c, n]``, ``x`` channels-last (channel stride
    1), ``w`` packed ``[GROUPS, taps, CIN_G, W_ROW]`` (columns past ``COUT_G`` zero).
    ``FLIP_W``: tap ``t`` reads the packed weight's tap ``taps - 1 - t`` (a transposed
    convolution as the forward one of the weight flipped over every tap dimension: the
    flip of all of them reverses the flattened tap order), so the host packs the weight
    without ``torch.flip``, a compute op the judge refuses in a kernel.

    One program per (row tile, group, column tile), the column tiles of a row tile
    adjacent in launch order (they share the gathered input in L2); grid axis 1 splits
    the ``taps x channel blocks`` steps (``SPLIT``: fp32 partials at ``s_split`` apart,
    in ``y``'s memory order, the bias added by the first). ``X_ALIGN``: every row's
    channel offset is a multiple of it (8: 16-byte loads; 4 and 2: 8- and 4-byte ones);
    ``EVEN_K``: ``BLOCK_K`` divides ``CIN_G`` (no channel mask, which would stop the loads
    vectorizing); ``Y_VEC``: runs
    of that many rows are neighbours in ``y`` (an NCHW output); ``Y_CVEC``: ``y``'s
    channels are contiguous and every row and ``COUT_G`` a multiple of that many (a
    channels-last output, stored in vectors along the channels).

    The host's divisibility proofs are restated as arithmetic (``proven.multiple``): Triton ignores ``tl.multiple_of`` on a scalar, and against an
    unspecialized count a channel mask left the activation's loads of uneven channel
    steps 2-byte and outside ``cp.async``, and channels-last outputs' stores 2-byte
    (sm_90 PTX, ``kernel_ptx.py``).

    ``PHASED``: a strided transposed convolution (unit dilation), ``y[o]`` summing
    ``x[(o + pad - k) / stride] * w[k]`` over the taps where the division is exact, ``w``
    packed unflipped. Grid axis 2 is the output's phase (``o mod stride`` in each dim):
    a phase's rows (``OD x OH x OW`` is its grid, ``ROD x ROH x ROW`` the output) take the
    same taps, ``k = k0 + j * stride``, at ``x`` position ``q + base - j``, so each step is
    a dense product as above and no tap is multiplied to be masked."""
    pid = tl.program_id(0)
    split = tl.program_id(1)
    M, CIN_G, COUT_G = _idx(M, BIG), _idx(CIN_G, BIG), _idx(COUT_G, BIG)
    CIN_G, COUT_G = multiple(CIN_G, X_ALIGN), multiple(COUT_G, Y_CVEC)
    W_ROW = _idx(W_ROW, BIG)
    D, H, W = _idx(D, BIG), _idx(H, BIG), _idx(W, BIG)
    OD, OH, OW = _idx(OD, BIG), _idx(OH, BIG), _idx(OW, BIG)
    xs0, xs2, xs3, xs4 = _idx(xs0, BIG), _idx(xs2, BIG), _idx(xs3, BIG), _idx(xs4, BIG)
    tiles_n = (COUT_G + BLOCK_N - 1) // BLOCK_N
    per_m = tiles_n * _idx(GROUPS, BIG)
    pid_m = pid // per_m
    rest = pid - pid_m * per_m
    g = rest // tiles_n
    pid_n = rest - g * tiles_n

    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    m_ok = rm < M
    nb, od, oh, ow = _unflatten(rm, OD, OH, OW)
    c_blocks = (CIN_G + BLOCK_K - 1) // BLOCK_K
    taps = KD * KH * KW
    if PHASED:  # this program's phase: its first tap and tap count a dim, rows' offsets
        phase = tl.program_id(2)
        r_w = phase % SW
        r_h = (phase // SW) % SH
        r_d = phase // (SW * SH)
        kd0 = (r_d + _idx(pd, BIG)) % SD
        kh0 = (r_h + _idx(ph, BIG)) % SH
        kw0 = (r_w + _idx(pw, BIG)) % SW
        nkd = tl.maximum((KD - kd0 + SD - 1) // SD, 0)
        nkh = tl.maximum((KH - kh0 + SH - 1) // SH, 0)
        nkw = tl.maximum((KW - kw0 + SW - 1) // SW, 0)
        taps = nkd * nkh * nkw
        bd = od + (r_d + _idx(pd, BIG) - kd0) // SD  # x position of the phase's first tap
        bh = oh + (r_h + _idx(ph, BIG) - kh0) // SH
        bw = ow + (r_w + _idx(pw, BIG) - kw0) // SW
        od = od * SD + r_d
        oh = oh * SH + r_h
        ow = ow * SW + r_w
        m_ok = m_ok & (od < _idx(ROD, BIG)) & (oh < _idx(ROH, BIG)) & (ow < _idx(ROW, BIG))
    else:
        bd = od * SD - _idx(pd, BIG)
        bh = oh * SH - _idx(ph, BIG)
        bw = ow * SW - _idx(pw, BIG)
    row0 = nb * xs0 + g * CIN_G
    # the packed weight's rows are W_ROW apart, a multiple of BLOCK_N (>= 16): stated,
    # since Triton cannot know it of a runtime size and would not vectorize the loads
    w_col = tl.multiple_of(g * (KD * KH * KW) * CIN_G * W_ROW + pid_n * BLOCK_N, 16)
    w_col = w_col + tl.arange(0, BLOCK_N)
    first = split * _idx(steps_per_split, BIG)
    last = tl.minimum(first + _idx(steps_per_split, BIG), taps * c_blocks)

    acc = tl.full([BLOCK_M, BLOCK_N], 0, tl.float32)
    comp = tl.full([BLOCK_M, BLOCK_N], 0, tl.float32)
    for step in range(first, last):
        t = step // c_blocks
        c0 = (step - t * c_blocks) * BLOCK_K
        if PHASED:  # the phase's t-th tap: k = k0 + j * stride, read at q + base - j
            jw = t % nkw
            jh = (t // nkw) % nkh
            jd = t // (nkw * nkh)
            kpos = ((kd0 + jd * SD) * KH + kh0 + jh * SH) * KW + kw0 + jw * SW
            ih = bh - jh
            iw = bw - jw
            i_d = bd - jd
        else:
            kpos = t
            kd, kh, kw = _kpos(kpos, KH, KW)
            if FLIP_W:
                kpos = KD * KH * KW - 1 - t
            ih = bh + kh * _idx(dh, BIG)
            iw = bw + kw * _idx(dw, BIG)
            i_d = bd + kd * _idx(dd, BIG)
        ok = m_ok & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
        row = row0 + ih * xs3 + iw * xs4
        if HAS_D:
            ok = ok & (i_d >= 0) & (i_d < D)
            row += i_d * xs2
        row = tl.multiple_of(row, X_ALIGN)
        c = c0 + rk
        k_row = tl.multiple_of((kpos * CIN_G + c) * W_ROW, 16)
        if EVEN_K:
            a = tl.load(x_ptr + row[:, None] + c[None, :], mask=ok[:, None], other=0.0)
            b = tl.load(w_ptr + w_col[None, :] + k_row[:, None])
        else:
            c_ok = c < CIN_G
            a = tl.load(x_ptr + row[:, None] + c[None, :], mask=ok[:, None] & c_ok[None, :],
                        other=0.0)  # fmt: skip
            b = tl.load(w_ptr + w_col[None, :] + k_row[:, None], mask=c_ok[:, None], other=0.0)
        acc, comp = dot_acc(a, b, acc, comp, IEEE, TO_F32)

    n_ok = rn < COUT_G
    co = g * COUT_G + rn
    if HAS_BIAS:
        bias = tl.load(b_ptr + co, mask=n_ok, other=0.0).to(tl.float32)
        acc += tl.where(split == 0, bias, 0.0)[None, :]
    y_row = nb * ys0 + od * ys2 + oh * ys3 + ow * ys4
    y_row = tl.max_contiguous(tl.multiple_of(y_row, Y_VEC), Y_VEC)
    if Y_CVEC > 1:  # channels contiguous, every row a multiple of Y_CVEC
        offs = tl.multiple_of(y_row, Y_CVEC)[:, None] + co[None, :]
    else:  # Y_VEC divides every channel's offset too (the caller's proof: ys1 a multiple)
        offs = y_row[:, None] + tl.multiple_of(co * ys1, Y_VEC)[None, :]
    # rows in whole runs of Y_VEC (M is a multiple of it): the same mask as rm < M, in a
    # form whose runs Triton sees are constant, so the stores can be vectors
    if PHASED:  # a phase's rows are strides apart in y (Y_VEC is 1) and some past its end
        m_store = m_ok
    else:
        m_store = (rm // Y_VEC) * Y_VEC < M
    mask = m_store[:, None] & n_ok[None, :]
    if SPLIT:
        # Y_VEC * Y_CVEC divides s_split (y's element count)
        s_split = multiple(_idx(s_split, BIG), Y_VEC * Y_CVEC)
        tl.store(y_ptr + split * s_split + offs, acc, mask=mask)
    else:
        tl.store(y_ptr + offs, acc.to(y_ptr.dtype.element_ty), mask=mask)


_nhwc = Launcher(_nhwc_kernel)


def nhwc_block_k(cin_g: int) -> int:
    """Input channels a step: for multiples of 8, the largest of ``NHWC_BLOCK_K``, 32 and
    16 that pads ``cin_g`` by at most a quarter (:data:`NHWC_BLOCK_K_ALIGNED_LARGEST`);
    else the largest that divides ``cin_g``; else the largest that pads it by at most a
    quarter; else the one that pads it least (the larger on a tie). Padded channels are
    loaded masked and multiplied as zeros, and small steps cost loop trips, so a quarter
    of waste is borne for a large step.

    On an H200 (device time, 2026-12-01, ``conv-heldout-phased-bk-h200-2026-12-01.md``,
    tuning half) the phased input gradients of 36 channels ran their GEMM 5.6x faster
    in 16-channel steps (126 us against 707 in one 64-channel step, 28 of it masked) and
    1.4x faster than in 32-channel steps, whose padding is the 64-channel one's."""
    steps = [k for k in (NHWC_BLOCK_K, 32, 16) if k <= NHWC_BLOCK_K]
    padded = {k: cdiv(cin_g, k) * k for k in steps}
    within = [k for k in steps if padded[k] * 4 <= cin_g * 5]
    if NHWC_BLOCK_K_ALIGNED_LARGEST and cin_g % 8 == 0 and within:
        return within[0]
    exact = [k for k in steps if cin_g % k == 0]
    if exact:
        return exact[0]
    if not NHWC_BLOCK_K_LEAST_PADDING:
        return min(NHWC_BLOCK_K, max(16, next_pow2(cin_g)))
    return within[0] if within else min(steps, key=lambda k: (padded[k], -k))


def nhwc_blocks(cout_g: int, cin_g: int) -> tuple[int, int, int, int, int]:
    """(BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages) for a group's ``cout_g`` output
    and ``cin_g`` input channels."""
    bn = min(NHWC_BLOCK_N, max(16, next_pow2(cout_g)))
    bk = nhwc_block_k(cin_g)
    if _INTERPRETING:  # few, tall programs: the interpreter pays per program and per step
        return 256, bn, bk, 4, 1
    bm = NHWC_BLOCK_M
    warps = NHWC_WARPS if bm * bn >= 128 * 128 else 4
    return bm, bn, bk, warps, NHWC_STAGES


def _packed_weight(w5: torch.Tensor, groups: int, transposed: bool, bn: int) -> torch.Tensor:
    """``[groups, taps, C_in/g, C_out/g rounded up to bn]`` from a 5-D weight, forward
    ``[C_out, C_in/g, k...]`` or transposed ``[C_in, C_out/g, k...]``, its taps in their
    own order (the kernel reads a transposed weight's taps reversed: ``FLIP_W``)."""
    kvol = w5.shape[2] * w5.shape[3] * w5.shape[4]
    if transposed:
        cin_g, cout_g = w5.shape[0] // groups, w5.shape[1]
        src = w5.reshape(groups, cin_g, cout_g, kvol).permute(0, 3, 1, 2)
    else:
        cout_g, cin_g = w5.shape[0] // groups, w5.shape[1]
        src = w5.reshape(groups, cout_g, cin_g, kvol).permute(0, 3, 2, 1)
    cols = cdiv(cout_g, bn) * bn
    if cols == cout_g:
        return src.contiguous()
    out = torch.zeros((groups, kvol, cin_g, cols), dtype=w5.dtype, device=w5.device)
    out[..., :cout_g] = src
    return out


def _y_run(y_shape: tuple[int, ...], s: tuple[int, ...], bm: int) -> int:
    """Rows of a tile that are neighbours in the output (shape ``y_shape``, strides ``s``)
    in aligned runs (8, 4, 2 or 1): an output whose positions are dense and contiguous
    (NCHW), its volume split into runs."""
    _, _, od, oh, ow = y_shape
    if s[4] != 1 or (oh > 1 and s[3] != ow) or (od > 1 and s[2] != oh * ow):
        return 1
    vol = od * oh * ow
    for v in (8, 4, 2):
        if vol % v == 0 and bm % v == 0 and s[0] % v == 0 and s[1] % v == 0:
            return v
    return 1


def _span(shape: tuple[int, ...], stride: tuple[int, ...]) -> int:
    """The largest element offset of a tensor of ``shape`` and ``stride``."""
    return sum((n - 1) * abs(st) for n, st in zip(shape, stride))


@functools.lru_cache(maxsize=4096)
def _gemm_plan(
    x_shape: tuple[int, ...], x_stride: tuple[int, ...], w_shape: tuple[int, ...],
    y_shape: tuple[int, ...], y_stride: tuple[int, ...], cin_g: int, cout_g: int,
    groups: int, stride: tuple[int, ...], padding: tuple[int, ...],
    dilation: tuple[int, ...], transposed: bool, has_d: bool, has_bias: bool, ieee: bool,
    device: torch.device, i32_limit: int, tunables: tuple[Any, ...],
) -> tuple[int, int, tuple[int, int, int], tuple[int, ...], dict[str, Any]]:  # fmt: skip
    """``(BLOCK_N, splits, grid, integer arguments, constexprs)`` of a launch: everything
    of :func:`nhwc_convolution` that follows from sizes, strides and settings alone,
    kept per distinct call (a model calls few shapes many times; with the plans kept the
    path's Python took 12.7 us a call on the 2-core CPU, 23.4 without). ``tunables`` holds the module settings read, so a
    change of them (a sweep's ``--set``, a test's) is a new plan."""
    KD, KH, KW = w_shape[2:]
    phased = transposed and any(s != 1 for s in stride)
    if transposed and not phased:  # o + pad - k * dil == o - pad' + k' * dil, k' = K - 1 - k
        padding = tuple(d * (k - 1) - p for d, k, p in zip(dilation, (KD, KH, KW), padding))
    bm, bn, bk, warps, stages = nhwc_blocks(cout_g, cin_g)
    N = x_shape[0]
    D, H, W = x_shape[2:]
    real = y_shape[2:]
    # the rows' grid: the output, or for a phased convolution one phase's share of it
    OD, OH, OW = (cdiv(o, s) for o, s in zip(real, stride)) if phased else real
    M = N * OD * OH * OW
    tiles = cdiv(M, bm) * cdiv(cout_g, bn) * groups
    taps = (cdiv(KD, stride[0]) * cdiv(KH, stride[1]) * cdiv(KW, stride[2]) if phased
            else KD * KH * KW)  # fmt: skip
    steps = taps * cdiv(cin_g, bk)
    phases = stride[0] * stride[1] * stride[2] if phased else 1
    splits, per = split_plan(tiles * (phases if NHWC_SPLIT_COUNTS_PHASES else 1), steps, device)
    xs = channels_last_strides(x_shape, x_stride)
    cols = cdiv(cout_g, bn) * bn
    y_numel = N * real[0] * real[1] * real[2] * cout_g * groups
    spans = (_span(x_shape, xs), groups * KD * KH * KW * cin_g * cols, _span(y_shape, y_stride))
    big = max(*spans, M + bm, splits * y_numel) >= i32_limit
    ints = (M, cin_g, cout_g, cols, groups, D, H, W, OD, OH, OW, *padding, *dilation,
            xs[0], xs[2], xs[3], xs[4], *y_stride, per, y_numel, *real)  # fmt: skip
    consts = dict(
        KD=KD, KH=KH, KW=KW, SD=stride[0], SH=stride[1], SW=stride[2], HAS_D=has_d,
        HAS_BIAS=has_bias, IEEE=ieee, TO_F32=_INTERPRETING, BIG=big,
        X_ALIGN=row_alignment(xs[0], xs[2], xs[3], xs[4], cin_g, partial=NHWC_X_ALIGN_PARTIAL),
        EVEN_K=cin_g % bk == 0, Y_VEC=1 if phased else _y_run(y_shape, y_stride, bm),
        Y_CVEC=8 if y_stride[1] == 1 and all(
            s % 8 == 0 for s in (y_stride[0], y_stride[2], y_stride[3], y_stride[4], cout_g)
        ) else 1,
        SPLIT=splits > 1, PHASED=phased, FLIP_W=transposed and not phased,
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=warps, num_stages=stages,
    )  # fmt: skip
    return bn, splits, (tiles, splits, phases), ints, consts


def nhwc_convolution(
    x5: torch.Tensor, w5: torch.Tensor, bias: torch.Tensor | None, y5: torch.Tensor,
    cin_g: int, cout_g: int, groups: int, stride: list[int], padding: list[int],
    dilation: list[int], transposed: bool, has_d: bool, i32_limit: int,
) -> bool:  # fmt: skip
    """The convolution of 5-D views ``x5 * w5 -> y5`` through this module's kernel, or
    False where it does not serve it: fewer than ``NHWC_MIN_CIN`` input channels a group
    (``NHWC_MIN_CIN_PHASED`` for a strided transposed convolution, which it serves while
    ``NHWC_STRIDED_TRANSPOSED`` and of unit dilation). ``i32_limit``: offsets from it on
    need 64-bit indexing (``conv._I32_LIMIT``)."""
    phased = transposed and any(s != 1 for s in stride)
    if cin_g < (NHWC_MIN_CIN_PHASED if phased else NHWC_MIN_CIN):
        return False
    if phased and (not NHWC_STRIDED_TRANSPOSED or any(d != 1 for d in dilation)):
        return False
    bn, splits, grid, ints, consts = _gemm_plan(
        tuple(x5.shape), x5.stride(), tuple(w5.shape), tuple(y5.shape), y5.stride(), cin_g,
        cout_g, groups, tuple(stride), tuple(padding), tuple(dilation), transposed, has_d,
        bias is not None, x5.dtype == torch.float32, y5.device, i32_limit,
        (NHWC_BLOCK_M, NHWC_BLOCK_N, NHWC_BLOCK_K, NHWC_WARPS, NHWC_STAGES, _INTERPRETING,
         NHWC_BLOCK_K_LEAST_PADDING, NHWC_BLOCK_K_ALIGNED_LARGEST, NHWC_SPLIT_COUNTS_PHASES,
         NHWC_X_ALIGN_PARTIAL),
    )  # fmt: skip
    xc = channels_last_5d(x5)
    wp = _packed_weight(w5, groups, transposed, bn)
    target = split_target(y5, splits)
    _nhwc(grid, (xc, wp, bias if bias is not None else y5, target, *ints), **consts)
    sum_split_target(target, y5)
    return True
