"""Channels-last depthwise convolutions that walk down their images a row at a time, each
input row loaded once per column shift and added to every output row that reads it.

Why: :func:`~opbench.kernels._lib.conv_depthwise._depthwise_kernel` gathers every tap of
an output from L1: over channels-last ``[32, 512, 14, 14]`` with a 7x7 kernel (ConvNeXt's
depthwise layers, the held-out rows furthest behind eager) that is 49 loads of the input
and 49 of the weights an output row of a 4-position tile, and it ran 104 us against
cuDNN's 30 forward, 103 against 57 for the input gradient (H200, 2026-12-02,
``nhwc-bk-phases-h200-2026-12-02-top20.md``). Here a program owns a ``[BLOCK_W,
BLOCK_C]`` tile (output columns x channels, the channels contiguous) of one image and a
strip of output rows. It walks the input rows the strip reads, loads each as ``KW``
column-shifted tiles, and adds each tile, weighted by a kernel row's taps, to the ``KH``
output rows that read it, which it keeps as ``KH`` accumulators (``acc0`` .. ``acc6``,
rotated a row a step): an output row costs ``KW`` input loads, not ``KH x KW``, and an
input element is read from memory by one program (halo aside). The ``KH x KW`` weight
loads are the same every step; the compiler keeps them in registers across the walk,
``KH x KW`` a channel a thread (:data:`DW_CL_ROWS_BLOCK_C` says what that cost).

Served (:func:`cl_rows_plan` says which calls): channels-last 2-D inputs and outputs (the
channel stride 1), one input and one output channel a group (``groups == C``), kernels of
at most 7 x 7 at unit dilation; the forward at unit stride and the transposed
convolution of unit stride (the input gradient of a unit-stride depthwise convolution:
the forward over ``grad_output`` with the taps reversed and the padding ``k - 1 - p``).
On (:data:`DW_CL_ROWS`) since a device-time A/B against the gather kernel (H200,
2026-12-02, ``dw-cl-rows-cl-h200-2026-12-02.md``, the 12 most used channels-last depthwise
rows of each half): the tuning half's 4 forward rows 1.77x, held out 12 rows 1.78x (the
``[32, 512, 14, 14]`` 7x7 row, ConvNeXt's, 0.36x -> 0.70x eager; ``[32, 1024, 7, 7]``
7x7 the one it slowed, 0.45x -> 0.41x).

Only triton.language builtins inside the kernels (``tl.full``, no ``tl.zeros``):
``conv_kernels``' docstring says why.
"""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

from opbench.kernels._lib.conv_depthwise_rows import fill_strips
from opbench.kernels._lib.conv_kernels import _idx
from opbench.kernels._lib.launch import INTERPRETING, Launcher, cdiv, jit_unspecialized, next_pow2
from opbench.kernels._lib.proven import common_power_of_two, multiple, multiples

__all__ = [
    "DW_CL_ROWS", "DW_CL_ROWS_ALIGN_RUNS", "DW_CL_ROWS_BLOCK_C", "DW_CL_ROWS_BLOCK_W",
    "DW_CL_ROWS_MAX_K", "DW_CL_ROWS_MIN_HEIGHT_OVER_K", "DW_CL_ROWS_STAGES",
    "DW_CL_ROWS_MIN_PROGRAMS", "DW_CL_ROWS_STRIP", "DW_CL_ROWS_WARPS", "_dw_cl_rows",
    "cl_rows_plan", "cl_rows_settings",
]  # fmt: skip

_INTERPRETING = INTERPRETING

#: Whether :func:`cl_rows_plan` serves the calls it can (off: the gather kernel serves
#: them). On since its A/B (the module docstring).
DW_CL_ROWS = True
#: A program's tile: ``BLOCK_W`` output columns (a power of two over the output's width,
#: at most this) x ``BLOCK_C`` channels (at most this), in ``DW_CL_ROWS_WARPS`` warps.
#: First chosen from the sm_90 code on the CPU machine (Triton 3.9, ``kernel_ptx.py
#: --sass``, 7x7): the compiler keeps the 49 taps' weights in registers across the walk,
#: so a thread's share of the tile sets the register count: 16 x 64 on 4 warps (8
#: elements a thread) took 255 registers and 216 bytes of stack; 16 x 32 on 8 warps (2 a
#: thread) 215 and none; 190 since the taps are loaded before the loop (:func:`_tap_row`,
#: 2026-12-02; 170 with :data:`DW_CL_ROWS_ALIGN_RUNS`). 16 columns hold a 14-wide
#: ConvNeXt row. 4 warps since the H200 timed them (2026-12-02, 12 most used depthwise
#: rows of each half made channels-last, device time): 16 x 32 on 4 spills 136 bytes at
#: 7x7 yet ran 1.161x the 8 warps' speed on the tuning half (1.082x held out), faster on
#: every 7x7 row too (ConvNeXt's ``[32, 768, 32, 32]`` 324 -> 232 us); with channel runs
#: on, 8 warps read 0.846x (0.871x held out): ``dw-cl-walk-settings-h200-2026-12-02``,
#: ``dw-cl-walk-defaults-h200-2026-12-02`` in ``benchmarks/results``.
DW_CL_ROWS_BLOCK_W = 16
DW_CL_ROWS_BLOCK_C = 32
#: Output rows a program walks: its first ``KH - 1`` input rows are the strip's overhead.
DW_CL_ROWS_STRIP = 16
DW_CL_ROWS_WARPS = 4
#: Fewest programs the grid should have: strips are halved (down to one row) until it
#: has them (twice an H200's 132 SMs), as the NCHW walk's rule (``DW_ROWS_MIN_PROGRAMS``).
#: 1,056 ran 0.787x as fast on the tuning rows it moves (H200, 2026-12-02); 8 columns in
#: place of 16, 0.986x.
DW_CL_ROWS_MIN_PROGRAMS = 264
#: Largest kernel side served: the accumulators are named, seven of them.
DW_CL_ROWS_MAX_K = 7
#: Fewest output rows a served call has, as a multiple of the kernel's height (0: any).
#: Why: a program walks ``KH - 1`` input rows before its first output row is whole, so a
#: plane no taller than its kernel spends about half its loads on that ramp; the gather
#: kernel reads each output's taps directly. The one held-out row of that kind among the
#: 12 most used channels-last ones, ``[32, 1024, 7, 7]`` 7x7, ran slower walked (0.41x
#: eager against 0.45x gathered; H200, 2026-12-02, ``dw-cl-rows-cl-h200-2026-12-02.json``)
#: while every taller one ran faster; held out, so it decides nothing: 0 until the tuning
#: half's rows made channels-last decide it: they did (H200, 2026-12-02, ``tall`` = 2):
#: the 3 tuning rows it moves ran 0.482x as fast (``[128, 1152, 7, 7]`` 5x5 52 -> 116 us).
DW_CL_ROWS_MIN_HEIGHT_OVER_K = 0
#: Whether the channel count and the position strides reach the kernel restated as
#: multiples of the largest of 8, 4, 2 they all share (``proven.multiple``), so its
#: channel loads and stores are vectors where those are no multiples of 16. Why: Triton
#: proves alignment only from multiples of 16, so 24, 40, 48, 72, 120, 168 or 216 channels
#: (CoaT's, EfficientNet's, NASNet's; the tuning half's ``[16, 216, 42, 42]``) compiled
#: every access 2 bytes wide: 114 ``ld.global.b16`` on 198 registers for a 7x7 walk
#: where restated runs of 8 load 57 ``b32`` on 170 (sm_90 code read on the CPU, Triton
#: 3.9, ``kernel_ptx.py``; 249 and 215 before the taps left the loop). CoaT's
#: ``[128, 24, 56, 56]`` 7x7 ran 0.39x eager (H200, 2026-12-02). On since the H200 timed
#: it (2026-12-02, ``conv_pending.sh`` step 8): 1.079x as fast (device time) as unrestated
#: counts on the tuning half (1.079x held out; the tuning half's 216 channels 85 -> 68
#: us at 7x7); against the new defaults, off reads 0.912x (0.878x).
DW_CL_ROWS_ALIGN_RUNS = True
#: Stages of the walk's loop over input rows (``tl.range(num_stages=...)``; 1: a plain
#: loop). Why: the walk waits on each row's loads before its products (a step's 7 loads
#: then 98 FMAs a thread, with one 8-warp program an SM at 190 registers), and Triton
#: pipelines no load of a plain loop that feeds no ``tl.dot``: at 3 stages the row's 7
#: tiles come through ``cp.async`` into shared memory two rows ahead while the taps,
#: loaded once before the loop (:func:`_tap_row`), stay in registers (sm_90 code read on
#: the CPU: 21 ``cp.async``, 49 weight loads, 179 registers, no spill). ConvNeXt's
#: ``[32, 512, 14, 14]`` 7x7 took 52.9 us against cuDNN's 29.9 (H200, 2026-12-02).
#: Timed on the H200 (2026-12-02, ``conv_pending.sh`` step 8): 0.947x the plain loop's
#: speed on the tuning half with 8 warps, 0.985x (1.01x held out) on the 4-warp defaults:
#: off.
DW_CL_ROWS_STAGES = 1


def cl_rows_settings() -> tuple[Any, ...]:
    """Every setting a plan of this kernel depends on, read now (a plan cache's key)."""
    return (DW_CL_ROWS, DW_CL_ROWS_BLOCK_W, DW_CL_ROWS_BLOCK_C, DW_CL_ROWS_STRIP,
            DW_CL_ROWS_WARPS, DW_CL_ROWS_MIN_PROGRAMS, DW_CL_ROWS_MIN_HEIGHT_OVER_K,
            DW_CL_ROWS_ALIGN_RUNS, DW_CL_ROWS_STAGES)  # fmt: skip


@triton.jit
def _tap(w_ptr, c, c_ok, C, kh, kw, KH: tl.constexpr, KW: tl.constexpr, FLIP: tl.constexpr):
    """Tap ``(kh, kw)`` of the tile's channels as a ``[1, BLOCK_C]`` fp32 row, from the
    tap-major weight (``[KH * KW, C]``); reversed for a transposed call."""
    if FLIP:
        t = (KH - 1 - kh) * KW + (KW - 1 - kw)
    else:
        t = kh * KW + kw
    return tl.load(w_ptr + t * C + c, mask=c_ok, other=0.0).to(tl.float32)[None, :]


@triton.jit
def _tap_row(w_ptr, c, c_ok, C, kh, KH: tl.constexpr, KW: tl.constexpr, FLIP: tl.constexpr):
    """Kernel row ``kh``'s ``KW`` taps (:func:`_tap`) as a tuple of seven, those past
    ``KW`` repeating the first (never read): loaded once, before the walk, so they stay
    in registers however the walk's loop is pipelined."""
    t0 = _tap(w_ptr, c, c_ok, C, kh, 0, KH, KW, FLIP)
    t1, t2, t3, t4, t5, t6 = t0, t0, t0, t0, t0, t0
    if KW > 1:
        t1 = _tap(w_ptr, c, c_ok, C, kh, 1, KH, KW, FLIP)
    if KW > 2:
        t2 = _tap(w_ptr, c, c_ok, C, kh, 2, KH, KW, FLIP)
    if KW > 3:
        t3 = _tap(w_ptr, c, c_ok, C, kh, 3, KH, KW, FLIP)
    if KW > 4:
        t4 = _tap(w_ptr, c, c_ok, C, kh, 4, KH, KW, FLIP)
    if KW > 5:
        t5 = _tap(w_ptr, c, c_ok, C, kh, 5, KH, KW, FLIP)
    if KW > 6:
        t6 = _tap(w_ptr, c, c_ok, C, kh, 6, KH, KW, FLIP)
    return t0, t1, t2, t3, t4, t5, t6


@triton.jit
def _rotate(a1, a2, a3, a4, a5, a6, zero, KH: tl.constexpr):
    """The accumulators one output row on: the ``j``-th takes the ``j + 1``-th's sum, the
    last of the ``KH`` in use starts at zero (those past it stay zero)."""
    n0, n1, n2, n3, n4, n5 = zero, zero, zero, zero, zero, zero
    if KH > 1:
        n0 = a1
    if KH > 2:
        n1 = a2
    if KH > 3:
        n2 = a3
    if KH > 4:
        n3 = a4
    if KH > 5:
        n4 = a5
    if KH > 6:
        n5 = a6
    return n0, n1, n2, n3, n4, n5, zero


@jit_unspecialized(keep=("C", "xs0", "xs3", "xs4", "ys0", "ys3", "ys4"))
def _dw_cl_rows_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr,
    C: tl.int64, H: tl.int64, W: tl.int64, OH: tl.int64, OW: tl.int64,
    ph: tl.int64, pw: tl.int64, strip: tl.int64, strips: tl.int64,
    xs0: tl.int64, xs3: tl.int64, xs4: tl.int64, ys0: tl.int64, ys3: tl.int64, ys4: tl.int64,
    KH: tl.constexpr, KW: tl.constexpr, FLIP: tl.constexpr, HAS_BIAS: tl.constexpr,
    BIG: tl.constexpr, BLOCK_W: tl.constexpr, BLOCK_C: tl.constexpr, ALIGN: tl.constexpr,
    STAGES: tl.constexpr,
):  # fmt: skip
    """``y[n, o, q, c] = sum over kh < KH, kw < KW of x[n, o - ph + kh, q - pw + kw, c] *
    w[kh, kw, c]`` (``w`` tap-major, reversed where ``FLIP``), channels-last both (the
    channel stride 1), accumulated in fp32 and rounded once. ``ALIGN``: ``C`` and the
    position strides are multiples of it (:data:`DW_CL_ROWS_ALIGN_RUNS`; 1: unknown).

    Grid: (channel blocks, column blocks, images x strips of ``strip`` output rows). The
    walk visits input rows ``r`` from the strip's first output row's top one to its last
    output row's bottom one; accumulator ``j`` holds output row ``r + ph - (KH - 1) + j``,
    so row ``r`` adds its taps of kernel row ``KH - 1 - j`` to it. After row ``r`` the
    first accumulator's row has every kernel row: stored if it is the strip's, then the
    accumulators move up one."""
    pid_c = tl.program_id(0)
    pid_w = tl.program_id(1)
    pid_ns = _idx(tl.program_id(2), BIG)
    C, H, W = multiple(_idx(C, BIG), ALIGN), _idx(H, BIG), _idx(W, BIG)
    OH, OW, ph, pw = _idx(OH, BIG), _idx(OW, BIG), _idx(ph, BIG), _idx(pw, BIG)
    strip, strips = _idx(strip, BIG), _idx(strips, BIG)
    # the host's proof (ALIGN divides them), in a form Triton reads
    xs0, xs3, xs4 = multiples(_idx(xs0, BIG), _idx(xs3, BIG), _idx(xs4, BIG), ALIGN)
    ys0, ys3, ys4 = multiples(_idx(ys0, BIG), _idx(ys3, BIG), _idx(ys4, BIG), ALIGN)
    n = pid_ns // strips
    first = (pid_ns - n * strips) * strip
    last = tl.minimum(first + strip, OH)
    c = _idx(pid_c, BIG) * BLOCK_C + tl.arange(0, BLOCK_C)
    c_ok = c < C
    q = _idx(pid_w, BIG) * BLOCK_W + tl.arange(0, BLOCK_W)
    q_ok = q < OW
    xb = x_ptr + n * xs0
    zero = tl.full([BLOCK_W, BLOCK_C], 0, tl.float32)
    acc0, acc1, acc2, acc3, acc4, acc5, acc6 = zero, zero, zero, zero, zero, zero, zero
    if HAS_BIAS:
        bias = tl.load(b_ptr + c, mask=c_ok, other=0.0).to(tl.float32)[None, :]
    else:
        bias = tl.full([1, BLOCK_C], 0, tl.float32)
    yb = y_ptr + n * ys0 + (q * ys4)[:, None] + c[None, :]
    y_ok = q_ok[:, None] & c_ok[None, :]
    # accumulator j's taps: kernel row KH - 1 - j (rows past KH alias the first, unread)
    w0 = _tap_row(w_ptr, c, c_ok, C, KH - 1, KH, KW, FLIP)
    w1, w2, w3, w4, w5, w6 = w0, w0, w0, w0, w0, w0
    if KH > 1:
        w1 = _tap_row(w_ptr, c, c_ok, C, KH - 2, KH, KW, FLIP)
    if KH > 2:
        w2 = _tap_row(w_ptr, c, c_ok, C, KH - 3, KH, KW, FLIP)
    if KH > 3:
        w3 = _tap_row(w_ptr, c, c_ok, C, KH - 4, KH, KW, FLIP)
    if KH > 4:
        w4 = _tap_row(w_ptr, c, c_ok, C, KH - 5, KH, KW, FLIP)
    if KH > 5:
        w5 = _tap_row(w_ptr, c, c_ok, C, KH - 6, KH, KW, FLIP)
    if KH > 6:
        w6 = _tap_row(w_ptr, c, c_ok, C, KH - 7, KH, KW, FLIP)
    for r in tl.range(first - ph, last - ph + KH - 1, num_stages=STAGES):
        # the row as a [1, 1] tile: the interpreter's AND of a tile and a scalar bool is int32
        rr = tl.full([1, 1], 0, ph.dtype) + r
        r_ok = (rr >= 0) & (rr < H)
        row = xb + r * xs3
        for kw in tl.static_range(KW):
            iw = q - pw + kw
            ok = (q_ok & (iw >= 0) & (iw < W))[:, None] & c_ok[None, :] & r_ok
            xt = tl.load(row + (iw * xs4)[:, None] + c[None, :], mask=ok, other=0.0)
            xt = xt.to(tl.float32)
            acc0 += xt * w0[kw]
            if KH > 1:
                acc1 += xt * w1[kw]
            if KH > 2:
                acc2 += xt * w2[kw]
            if KH > 3:
                acc3 += xt * w3[kw]
            if KH > 4:
                acc4 += xt * w4[kw]
            if KH > 5:
                acc5 += xt * w5[kw]
            if KH > 6:
                acc6 += xt * w6[kw]
        o = r + ph - (KH - 1)  # the output row the first accumulator completes
        if o >= first:
            tl.store(yb + o * ys3, (acc0 + bias).to(y_ptr.dtype.element_ty), mask=y_ok)
        acc0, acc1, acc2, acc3, acc4, acc5, acc6 = _rotate(
            acc1, acc2, acc3, acc4, acc5, acc6, zero, KH
        )


_dw_cl_rows = Launcher(
    _dw_cl_rows_kernel, specialize=("C", "xs0", "xs3", "xs4", "ys0", "ys3", "ys4")
)


def cl_rows_plan(
    x_shape: tuple[int, ...], x_stride: tuple[int, ...], y_shape: tuple[int, ...],
    y_stride: tuple[int, ...], ksize: tuple[int, int, int], cin_g: int, cout_g: int,
    stride: tuple[int, int, int], padding: tuple[int, int, int],
    dilation: tuple[int, int, int], transposed: bool, spatial: int, has_bias: bool,
    big: bool,
) -> tuple[tuple[int, int, int], tuple[int, ...], dict[str, Any]] | None:  # fmt: skip
    """``(grid, ints, constexprs)`` of :func:`_dw_cl_rows_kernel` for 5-D views
    (``[N, C, 1, H, W]``) of these sizes and strides, the weight read tap-major
    (``conv_depthwise.taps_major``), or None where it does not serve the call (the module
    docstring) or :data:`DW_CL_ROWS` is off. ``big``: 64-bit offsets."""
    N, C, D, H, W = x_shape
    OH, OW = y_shape[3:]
    _, KH, KW = ksize
    if not (
        DW_CL_ROWS and spatial == 2 and D == 1 and cin_g == 1 and cout_g == 1 and C > 1
        and ksize[0] == 1 and max(KH, KW) <= DW_CL_ROWS_MAX_K and dilation[1:] == (1, 1)
        and stride[1:] == (1, 1) and x_stride[1] == 1 and y_stride[1] == 1
        and y_shape[1] == C and N * C * OH * OW > 0
        and OH >= DW_CL_ROWS_MIN_HEIGHT_OVER_K * KH
    ):  # fmt: skip
        return None
    ph, pw = padding[1:]
    if transposed:  # the forward over grad_output, taps reversed
        ph, pw = KH - 1 - ph, KW - 1 - pw
    if _INTERPRETING:  # few, large programs: the interpreter pays per program
        bw, bc, strip = next_pow2(OW), next_pow2(C), OH
    else:
        bw = min(DW_CL_ROWS_BLOCK_W, next_pow2(OW))
        bc = min(DW_CL_ROWS_BLOCK_C, next_pow2(C))
        programs_a_strip = cdiv(C, bc) * cdiv(OW, bw) * N
        strip = fill_strips(
            min(OH, DW_CL_ROWS_STRIP), OH, programs_a_strip, DW_CL_ROWS_MIN_PROGRAMS
        )
    strips = cdiv(OH, strip)
    grid = (cdiv(C, bc), cdiv(OW, bw), N * strips)
    ints = (C, H, W, OH, OW, ph, pw, strip, strips, x_stride[0], x_stride[3], x_stride[4],
            y_stride[0], y_stride[3], y_stride[4])  # fmt: skip
    align = 1
    if DW_CL_ROWS_ALIGN_RUNS:
        align = common_power_of_two(C, *x_stride[:1], *x_stride[3:], *y_stride[:1], *y_stride[3:])
    consts = dict(KH=KH, KW=KW, FLIP=transposed, HAS_BIAS=has_bias, BIG=big, BLOCK_W=bw,
                  BLOCK_C=bc, ALIGN=align, STAGES=DW_CL_ROWS_STAGES,
                  num_warps=DW_CL_ROWS_WARPS)  # fmt: skip
    return grid, ints, consts
