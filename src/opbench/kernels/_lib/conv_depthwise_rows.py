"""NCHW 3x3 depthwise convolutions that walk down their planes a row at a time, each input
row loaded once per column shift and kept in registers for the output rows that need it.

Why: :func:`~opbench.kernels._lib.conv_depthwise._depthwise_kernel` gathers every tap of
every output from L1, 9 loads an output for a 3x3 kernel, each 2 bytes wide (an odd plane
width leaves no aligned vector), and ran the held-out ``[32, 728, 19, 19]`` row at 59 us
against cuDNN's 19.8 on an H200 (2026-11-29, ``dw-unroll-h200-2026-11-29.md``): no tile
closed it, and without any bounds it still took 46.5 us. cuDNN stages a tile and its halo
in shared memory and reuses it across the taps. Triton has no handle on shared memory or
register shifts, but a loop can carry tiles: a program here owns ``BLOCK_PL`` planes x
``BLOCK_W`` output columns x a strip of output rows, loads each input row it meets as 3
column-shifted tiles, and keeps the last rows in registers, so a unit-stride 3x3 output
costs 3 loads (a stride-2 one 6) where the gather costs 9, and each input element is read
from memory by one program (its halo rows and columns aside).

Served (:func:`rows_plan` says which calls): NCHW-like planes (the width any stride), one
input and one output channel a group (``groups == C``, no channel multiplier), a 3x3
kernel of unit dilation, the forward at strides 1 or 2 along each axis and the transposed
convolution of unit stride (the input gradient of a unit-stride depthwise convolution:
the forward over ``grad_output`` with the taps reversed and the padding ``2 - p``). The
rest stays on the gather kernel.

Where it stands (H200, 2026-12-01, device time, the 12 most used 3x3 depthwise rows of
each half and op; ``dw-rows-h200-2026-12-01*.md``): tiles were picked on the tuning half
(128 elements: 1.3x over 256, and 64 or 32, 2 warps or strips of 8 lost). Against the
gather kernel on the same rows, tuning: forward 1.72x (10 rows), backward 1.19x (the
input gradient's share); held out, judged after: 1.14x and 1.035x (9 rows each). Planes
of 42 x 42 and wider run 1.9-2.4x the gather's speed and at or above eager's; 11 x 11 and
14 x 14 ones 1.3-1.4x; outputs under 9 wide stay on the gather (``DW_ROWS_MIN_WIDTH``: the
walk ran 7 x 7 and 8 x 8 planes 0.74-0.83x its speed). Still slower than the gather: the
held-out rows of one image and 88 channels (10 x 10 to 40 x 40: 0.59-0.75x, 1.4-4.5 us),
whose few planes give the grid fewer programs than the GPU has SMs; and still slower than
cuDNN: 19 x 19 planes (``[32, 728, 19, 19]``: 59 -> 36 us, cuDNN 19.9).

Only triton.language builtins inside the kernels (``tl.full``, no ``tl.zeros``):
``conv_kernels``' docstring says why.
"""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

from opbench.kernels._lib.conv_kernels import _idx
from opbench.kernels._lib.launch import INTERPRETING, Launcher, cdiv, jit_unspecialized, next_pow2

__all__ = [
    "DW_ROWS", "DW_ROWS_MIN_PROGRAMS", "DW_ROWS_MIN_WIDTH", "DW_ROWS_STRIP", "DW_ROWS_TILE",
    "DW_ROWS_WARPS", "_dw_rows", "fill_strips", "rows_plan", "rows_settings", "walk_tiles",
]  # fmt: skip

_INTERPRETING = INTERPRETING

#: Whether :func:`rows_plan` serves the calls it can (off: every depthwise call takes the
#: gather kernel, as before 2026-12-01; a sweep's ``--variant`` turns it off to compare).
DW_ROWS = True
#: Elements of a program's ``[BLOCK_PL, BLOCK_W]`` tile: ``BLOCK_W`` covers the output
#: width (a power of two, at most :data:`_MAX_BLOCK_W` and this), ``BLOCK_PL`` planes
#: fill the rest.
DW_ROWS_TILE = 128
#: Output rows a program walks (its strip): the first rows' loads (2 input rows at unit
#: stride, 1 at stride 2) are the strip's overhead, so longer strips waste less, shorter
#: ones give more programs to a small batch.
DW_ROWS_STRIP = 16
DW_ROWS_WARPS = 4
#: Narrowest output the walk serves: a narrower one's column tile of 8 leaves each warp's
#: loads 16 bytes a plane, and the gather kernel (every tap from L1, positions flattened
#: across planes) ran 7 x 7 and 8 x 8 planes faster (H200, 2026-12-01, below).
DW_ROWS_MIN_WIDTH = 9
#: Fewest programs the grid should have (0: no rule): strips are halved (down to one row)
#: until it has them (twice an H200's 132 SMs). Held-out rows of one image and 88
#: channels ran 0.59-0.75x the gather kernel's speed with 22-132 programs. Decided on
#: the tuning half's 3 x 3 depthwise rows rewritten to one image (H200, 2026-12-01,
#: ``conv_heldout.py --batch 1``, device time, noise 0.98-1.01): forward 1.56x over its
#: 8 changed rows, backward 1.17x over 7; the held-out half then ran 1.79x and 1.22x.
DW_ROWS_MIN_PROGRAMS = 264
#: Widest column tile: wider outputs are tiled over the grid's second axis.
_MAX_BLOCK_W = 64


def rows_settings() -> tuple[Any, ...]:
    """Every setting a plan of this kernel depends on, read now (a plan cache's key)."""
    return (DW_ROWS, DW_ROWS_TILE, DW_ROWS_STRIP, DW_ROWS_WARPS, DW_ROWS_MIN_WIDTH,
            DW_ROWS_MIN_PROGRAMS)  # fmt: skip


@triton.jit
def _program_tile(PLANES, C, OH, OW, strip, BIG: tl.constexpr, BLOCK_PL: tl.constexpr,
                  BLOCK_W: tl.constexpr):  # fmt: skip
    """A walking program's share of the grid (planes, column tiles, strips of rows):
    its planes (past ``PLANES`` clamped to the last, ``pl_ok`` says which are real) with
    their image and channel, its column tile's index and output columns, its strip's index
    and rows ``[first, last)``."""
    pl = _idx(tl.program_id(0), BIG) * BLOCK_PL + tl.arange(0, BLOCK_PL)
    pl_ok = pl < PLANES
    pl = tl.minimum(pl, PLANES - 1)
    pid_q = _idx(tl.program_id(1), BIG)
    q = pid_q * BLOCK_W + tl.arange(0, BLOCK_W)
    pid_s = _idx(tl.program_id(2), BIG)
    first = pid_s * _idx(strip, BIG)
    last = tl.minimum(first + _idx(strip, BIG), OH)
    return pl, pl_ok, pl // C, pl % C, pid_q, q, q < OW, pid_s, first, last


@triton.jit
def _row(p, ih, H, o0, o1, o2, k0, k1, k2):
    """Input row ``ih`` of the tile's planes (``p``: its ``[BLOCK_PL, 1]`` pointers) at the
    3 column shifts (offsets ``o*``, masks ``k*`` over the columns), fp32, zeros outside
    the plane."""
    # the row as a [1, 1] tile: the interpreter's AND of a tile and a scalar bool is int32
    rr = ih + tl.full([1, 1], 0, ih.dtype)
    r_ok = (rr >= 0) & (rr < H)
    return (
        tl.load(p + o0, mask=k0 & r_ok, other=0.0).to(tl.float32),
        tl.load(p + o1, mask=k1 & r_ok, other=0.0).to(tl.float32),
        tl.load(p + o2, mask=k2 & r_ok, other=0.0).to(tl.float32),
    )


@triton.jit
def _shifts(pl, q, q_ok, iw, W, xs4):
    """The three column shifts of the tile's input columns ``iw`` (the first tap's, for
    output columns ``q``): offsets ``[1, BLOCK_W]`` and masks over the whole tile (an op
    over both axes: the interpreter refuses a broadcast view as a mask)."""
    tile = (pl >= 0)[:, None]
    k0 = tile & (q_ok & (iw >= 0) & (iw < W))[None, :]
    k1 = tile & (q_ok & (iw + 1 >= 0) & (iw + 1 < W))[None, :]
    k2 = tile & (q_ok & (iw + 2 >= 0) & (iw + 2 < W))[None, :]
    return (iw * xs4)[None, :], ((iw + 1) * xs4)[None, :], ((iw + 2) * xs4)[None, :], k0, k1, k2


@triton.jit
def _taps(a0, a1, a2, w0, w1, w2):
    """One kernel row's contribution: its 3 taps over the row's 3 column shifts."""
    return a0 * w0 + a1 * w1 + a2 * w2


@triton.jit
def _tap(w_ptr, wc, kh: tl.constexpr, kw: tl.constexpr, ws3, ws4, FLIP: tl.constexpr):
    """Tap ``(kh, kw)`` of the tile's channels (``wc``: their weight offsets), fp32, as a
    ``[BLOCK_PL, 1]`` column; reversed (``2 - kh``, ``2 - kw``) for a transposed call."""
    if FLIP:
        t = tl.load(w_ptr + wc + (2 - kh) * ws3 + (2 - kw) * ws4)
    else:
        t = tl.load(w_ptr + wc + kh * ws3 + kw * ws4)
    return t.to(tl.float32)[:, None]


@jit_unspecialized
def _dw_rows_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr,
    PLANES: tl.int64, C: tl.int64, H: tl.int64, W: tl.int64, OH: tl.int64, OW: tl.int64,
    ph: tl.int64, pw: tl.int64, strip: tl.int64,
    xs0: tl.int64, xs1: tl.int64, xs3: tl.int64, xs4: tl.int64,
    ws0: tl.int64, ws3: tl.int64, ws4: tl.int64,
    ys0: tl.int64, ys1: tl.int64, ys3: tl.int64, ys4: tl.int64,
    SH: tl.constexpr, SW: tl.constexpr, FLIP: tl.constexpr, HAS_BIAS: tl.constexpr,
    BIG: tl.constexpr, BLOCK_PL: tl.constexpr, BLOCK_W: tl.constexpr,
):  # fmt: skip
    """``y[n, c, o, q] = sum over kh, kw < 3 of x[n, c, o*SH - ph + kh, q*SW - pw + kw] *
    w[c, kh, kw]`` (``w`` reversed where ``FLIP``), accumulated in fp32 and rounded once.

    Grid: (blocks of ``BLOCK_PL`` planes ``n * C + c``, blocks of ``BLOCK_W`` output
    columns, strips of ``strip`` output rows). The tile's planes past ``PLANES`` read the
    last one (only the store is masked). Unit stride: the loop carries the two input rows
    above the next output row's last one (6 tiles) and loads one row a step; stride 2:
    it carries the one row shared with the output row before, and loads two."""
    PLANES, C, H, W = _idx(PLANES, BIG), _idx(C, BIG), _idx(H, BIG), _idx(W, BIG)
    OH, OW, ph, pw = _idx(OH, BIG), _idx(OW, BIG), _idx(ph, BIG), _idx(pw, BIG)
    pl, pl_ok, n, c, _, q, q_ok, _, first, last = _program_tile(
        PLANES, C, OH, OW, strip, BIG, BLOCK_PL, BLOCK_W
    )
    o0, o1, o2, k0, k1, k2 = _shifts(pl, q, q_ok, q * SW - pw, W, _idx(xs4, BIG))
    xs3 = _idx(xs3, BIG)
    xb = x_ptr + (n * _idx(xs0, BIG) + c * _idx(xs1, BIG))[:, None]
    wc = c * _idx(ws0, BIG)
    ws3, ws4 = _idx(ws3, BIG), _idx(ws4, BIG)
    w00 = _tap(w_ptr, wc, 0, 0, ws3, ws4, FLIP)
    w01 = _tap(w_ptr, wc, 0, 1, ws3, ws4, FLIP)
    w02 = _tap(w_ptr, wc, 0, 2, ws3, ws4, FLIP)
    w10 = _tap(w_ptr, wc, 1, 0, ws3, ws4, FLIP)
    w11 = _tap(w_ptr, wc, 1, 1, ws3, ws4, FLIP)
    w12 = _tap(w_ptr, wc, 1, 2, ws3, ws4, FLIP)
    w20 = _tap(w_ptr, wc, 2, 0, ws3, ws4, FLIP)
    w21 = _tap(w_ptr, wc, 2, 1, ws3, ws4, FLIP)
    w22 = _tap(w_ptr, wc, 2, 2, ws3, ws4, FLIP)
    if HAS_BIAS:
        bias = tl.load(b_ptr + c).to(tl.float32)[:, None]
    else:
        bias = tl.full([BLOCK_PL, 1], 0, tl.float32)
    yb = y_ptr + (n * _idx(ys0, BIG) + c * _idx(ys1, BIG))[:, None] + (q * _idx(ys4, BIG))[None, :]
    ys3 = _idx(ys3, BIG)
    y_ok = pl_ok[:, None] & q_ok[None, :]
    ih = first * SH - ph  # the first output row's top input row
    a0, a1, a2 = _row(xb + ih * xs3, ih, H, o0, o1, o2, k0, k1, k2)
    if SH == 1:
        b0, b1, b2 = _row(xb + (ih + 1) * xs3, ih + 1, H, o0, o1, o2, k0, k1, k2)
        for o in range(first, last):
            r = o - ph + 2
            c0, c1, c2 = _row(xb + r * xs3, r, H, o0, o1, o2, k0, k1, k2)
            acc = bias + _taps(a0, a1, a2, w00, w01, w02)
            acc += _taps(b0, b1, b2, w10, w11, w12)
            acc += _taps(c0, c1, c2, w20, w21, w22)
            tl.store(yb + o * ys3, acc.to(y_ptr.dtype.element_ty), mask=y_ok)
            a0, a1, a2 = b0, b1, b2
            b0, b1, b2 = c0, c1, c2
    else:
        for o in range(first, last):
            r = o * 2 - ph + 1
            b0, b1, b2 = _row(xb + r * xs3, r, H, o0, o1, o2, k0, k1, k2)
            c0, c1, c2 = _row(xb + (r + 1) * xs3, r + 1, H, o0, o1, o2, k0, k1, k2)
            acc = bias + _taps(a0, a1, a2, w00, w01, w02)
            acc += _taps(b0, b1, b2, w10, w11, w12)
            acc += _taps(c0, c1, c2, w20, w21, w22)
            tl.store(yb + o * ys3, acc.to(y_ptr.dtype.element_ty), mask=y_ok)
            a0, a1, a2 = c0, c1, c2


_dw_rows = Launcher(_dw_rows_kernel)


def walk_tiles(planes: int, OH: int, OW: int, tile: int, strip: int,
               interpreting: bool) -> tuple[int, int, int]:  # fmt: skip
    """``(BLOCK_W, BLOCK_PL, strip)`` of a walking kernel (this module's, and the weight
    gradient's of ``conv_depthwise_wgrad_walk``): ``BLOCK_W`` a power of two over the
    output's width (at most :data:`_MAX_BLOCK_W` and ``tile``), ``BLOCK_PL`` planes
    filling ``tile`` elements, strips of ``strip`` rows. Under the interpreter (which pays
    per program) few, large programs: a tile over the whole width and every row."""
    if interpreting:
        return min(_MAX_BLOCK_W, next_pow2(OW)), min(16, next_pow2(planes)), OH
    bw = min(_MAX_BLOCK_W, tile, max(8, next_pow2(OW)))
    return bw, max(1, tile // bw), min(OH, strip)


def fill_strips(strip: int, rows: int, programs_a_strip: int, min_programs: int) -> int:
    """``strip`` (rows a program walks) halved until the grid holds at least
    ``min_programs`` programs (``programs_a_strip`` of them for each strip of ``rows``)
    or a program walks one row: fewer rows a program, more programs, where a small batch
    or a narrow plane left SMs idle (:data:`DW_ROWS_MIN_PROGRAMS`)."""
    while strip > 1 and programs_a_strip * cdiv(rows, strip) < min_programs:
        strip = cdiv(strip, 2)
    return strip


def rows_plan(
    x_shape: tuple[int, ...], x_stride: tuple[int, ...], w_stride: tuple[int, ...],
    y_shape: tuple[int, ...], y_stride: tuple[int, ...], ksize: tuple[int, int, int],
    cin_g: int, cout_g: int, stride: tuple[int, int, int], padding: tuple[int, int, int],
    dilation: tuple[int, int, int], transposed: bool, spatial: int, has_bias: bool,
    big: bool,
) -> tuple[tuple[int, int, int], tuple[int, ...], dict[str, Any]] | None:  # fmt: skip
    """``(grid, ints, constexprs)`` of :func:`_dw_rows_kernel` for 5-D views
    (``[N, C, 1, H, W]``) of these sizes and strides, or None where it does not serve the
    call (see the module docstring) or :data:`DW_ROWS` is off. ``big``: 64-bit offsets."""
    N, C, D, H, W = x_shape
    OH, OW = y_shape[3:]
    sh, sw = stride[1:]
    ph, pw = padding[1:]
    strides_ok = (sh, sw) == (1, 1) if transposed else sh in (1, 2) and sw in (1, 2)
    if not (
        DW_ROWS and spatial == 2 and D == 1 and cin_g == 1 and cout_g == 1
        and ksize == (1, 3, 3) and dilation[1:] == (1, 1) and strides_ok
        and x_stride[1] != 1 and y_shape[1] == C and N * C * OH * OW > 0
        and OW >= DW_ROWS_MIN_WIDTH
    ):  # fmt: skip
        return None
    if transposed:  # the forward over grad_output, taps reversed
        ph, pw = 2 - ph, 2 - pw
    bw, bpl, strip = walk_tiles(N * C, OH, OW, DW_ROWS_TILE, DW_ROWS_STRIP, _INTERPRETING)
    if not _INTERPRETING:
        strip = fill_strips(strip, OH, cdiv(N * C, bpl) * cdiv(OW, bw), DW_ROWS_MIN_PROGRAMS)
    grid = (cdiv(N * C, bpl), cdiv(OW, bw), cdiv(OH, strip))
    ints = (N * C, C, H, W, OH, OW, ph, pw, strip, x_stride[0], x_stride[1], x_stride[3],
            x_stride[4], w_stride[0], w_stride[3], w_stride[4], y_stride[0], y_stride[1],
            y_stride[3], y_stride[4])  # fmt: skip
    consts = dict(SH=sh, SW=sw, FLIP=transposed, HAS_BIAS=has_bias, BIG=big, BLOCK_PL=bpl,
                  BLOCK_W=bw, num_warps=DW_ROWS_WARPS)  # fmt: skip
    return grid, ints, consts
