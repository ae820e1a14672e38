"""The weight gradient of an NCHW 3x3 depthwise convolution as a row walk: the input rows
carried in registers as :mod:`~opbench.kernels._lib.conv_depthwise_rows` carries them
for the forward, each multiplied with the summed tensor's row at the 9 taps.

Why: on the held-out ``[32, 728, 19, 19]`` row the tensor-core kernel
(:mod:`~opbench.kernels._lib.conv_depthwise_wgrad_dot`) takes 117 us of the backward's
154, where cuDNN's weight gradient takes 40 (H200, 2026-12-01,
``dw-rows-h200-2026-12-01.md``); the forward's row walk read the same planes in 36. Here a
program owns ``BLOCK_PL`` planes x ``BLOCK_W`` columns x a strip of rows of the summed
tensor (``grad_output``), loads each of its rows once and each input row once per column
shift (unit stride: one new input row a step, two at stride 2), and adds the 9 products
into 9 fp32 tiles; at the end each tile is summed over its columns into a partial a plane
and tap, and the partials of every image, strip and column tile are summed in a fixed
order (:func:`~opbench.kernels._lib.matmul_shared.sum_split_target`: the same inputs give
the same bits).

Served (:func:`walk_weight_grad` says which calls): 16-bit NCHW-like 2-D planes, one
channel a group (no multiplier), a 3x3 kernel of unit dilation, strides 1 or 2 along each
axis, outputs at least :data:`~opbench.kernels._lib.conv_depthwise_rows.DW_ROWS_MIN_WIDTH`
wide, a dense weight gradient. On (:data:`DWG_WALK`) since the device-time A/B against the
tensor-core kernel on the traced rows: 1.27x on the tuning half, 1.245x held out (H200,
``dwg-walk-h200-2026-12-01.md``).

Only triton.language builtins inside the kernels (``tl.full``, no ``tl.zeros``;
``tl.reduce`` with the standard sum, no ``tl.sum``): ``conv_kernels``' docstring says why.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from opbench.kernels._lib import conv_depthwise_rows as dw_rows
from opbench.kernels._lib.conv_depthwise_rows import _program_tile, _row, _shifts
from opbench.kernels._lib.conv_kernels import _idx
from opbench.kernels._lib.launch import INTERPRETING, Launcher, cdiv, jit_unspecialized
from opbench.kernels._lib.matmul_shared import split_target, sum_split_target
from opbench.kernels._lib.reduction_kernels import _SUM_COMBINE

__all__ = ["DWG_WALK", "DWG_WALK_STRIP", "DWG_WALK_TILE", "DWG_WALK_WARPS", "walk_weight_grad"]

_INTERPRETING = INTERPRETING

#: Whether :func:`walk_weight_grad` serves the calls it can. On since the H200's device-time
#: A/B against the tensor-core kernel (2026-12-01, the 12 most used 3x3 depthwise backward
#: rows of each half, ``benchmarks/results/dwg-walk-h200-2026-12-01.md``): decided on the
#: tuning half, 1.27x over its 10 changed rows; the held-out half read 1.245x over its 9.
DWG_WALK = True
#: Elements of a program's ``[BLOCK_PL, BLOCK_W]`` tile (9 fp32 accumulators of it), rows
#: of ``grad_output`` a program walks, warps: the forward walk's choices (128 elements,
#: 16 rows, 4 warps), untimed here.
DWG_WALK_TILE = 128
DWG_WALK_STRIP = 16
DWG_WALK_WARPS = 4


@triton.jit
def _products(g, x0, x1, x2, t0, t1, t2):
    """One kernel row's three taps: ``g`` times the input row at each column shift, added
    to the row's accumulators."""
    return t0 + g * x0, t1 + g * x1, t2 + g * x2


@triton.jit
def _colsum(t):
    """``t`` summed over its columns (``[BLOCK_PL]``)."""
    return tl.reduce(t, 1, _SUM_COMBINE)


@triton.jit
def _partial(part_ptr, base, tap: tl.constexpr, t, ok):
    """A plane's partial of one tap: ``t`` summed over its columns, stored at
    ``base + tap`` (``base``: the planes' offsets of this program's split)."""
    tl.store(part_ptr + base + tap, _colsum(t).to(part_ptr.dtype.element_ty), mask=ok)


@jit_unspecialized
def _dwg_walk_kernel(
    a_ptr, b_ptr, part_ptr,
    PLANES: tl.int64, C: tl.int64, H: tl.int64, W: tl.int64, OH: tl.int64, OW: tl.int64,
    ph: tl.int64, pw: tl.int64, strip: tl.int64, col_tiles: tl.int64,
    as0: tl.int64, as1: tl.int64, as3: tl.int64, as4: tl.int64,
    bs0: tl.int64, bs1: tl.int64, bs3: tl.int64, bs4: tl.int64,
    SH: tl.constexpr, SW: tl.constexpr, BIG: tl.constexpr,
    BLOCK_PL: tl.constexpr, BLOCK_W: tl.constexpr,
):  # fmt: skip
    """``part[split, n*C + c, kh*3 + kw] = sum over this program's rows o and columns q of
    a[n, c, o, q] * b[n, c, o*SH - ph + kh, q*SW - pw + kw]`` (zero outside ``b``), with
    ``split = strip index * col_tiles + column tile``: the weight gradient's partials
    ``[splits * N, C * 9]``, summed over the first dimension by the host's
    ``sum_split_target``. Grid: (blocks of ``BLOCK_PL`` planes, column tiles, strips).
    The carried rows as in ``conv_depthwise_rows._dw_rows_kernel``."""
    PLANES, C, H, W = _idx(PLANES, BIG), _idx(C, BIG), _idx(H, BIG), _idx(W, BIG)
    OH, OW, ph, pw = _idx(OH, BIG), _idx(OW, BIG), _idx(ph, BIG), _idx(pw, BIG)
    pl, pl_ok, n, c, pid_q, q, q_ok, pid_s, first, last = _program_tile(
        PLANES, C, OH, OW, strip, BIG, BLOCK_PL, BLOCK_W
    )
    o0, o1, o2, k0, k1, k2 = _shifts(pl, q, q_ok, q * SW - pw, W, _idx(bs4, BIG))
    g_ok = (pl >= 0)[:, None] & q_ok[None, :]
    bs3, as3 = _idx(bs3, BIG), _idx(as3, BIG)
    xb = b_ptr + (n * _idx(bs0, BIG) + c * _idx(bs1, BIG))[:, None]
    gb = a_ptr + (n * _idx(as0, BIG) + c * _idx(as1, BIG))[:, None] + (q * _idx(as4, BIG))[None, :]
    z = tl.full([BLOCK_PL, BLOCK_W], 0, tl.float32)
    t00, t01, t02, t10, t11, t12, t20, t21, t22 = z, z, z, z, z, z, z, z, z
    ih = first * SH - ph  # the first summed row's top input row
    a0, a1, a2 = _row(xb + ih * bs3, ih, H, o0, o1, o2, k0, k1, k2)
    if SH == 1:
        b0, b1, b2 = _row(xb + (ih + 1) * bs3, ih + 1, H, o0, o1, o2, k0, k1, k2)
        for o in range(first, last):
            r = o - ph + 2
            c0, c1, c2 = _row(xb + r * bs3, r, H, o0, o1, o2, k0, k1, k2)
            g = tl.load(gb + o * as3, mask=g_ok, other=0.0).to(tl.float32)
            t00, t01, t02 = _products(g, a0, a1, a2, t00, t01, t02)
            t10, t11, t12 = _products(g, b0, b1, b2, t10, t11, t12)
            t20, t21, t22 = _products(g, c0, c1, c2, t20, t21, t22)
            a0, a1, a2 = b0, b1, b2
            b0, b1, b2 = c0, c1, c2
    else:
        for o in range(first, last):
            r = o * 2 - ph + 1
            b0, b1, b2 = _row(xb + r * bs3, r, H, o0, o1, o2, k0, k1, k2)
            c0, c1, c2 = _row(xb + (r + 1) * bs3, r + 1, H, o0, o1, o2, k0, k1, k2)
            g = tl.load(gb + o * as3, mask=g_ok, other=0.0).to(tl.float32)
            t00, t01, t02 = _products(g, a0, a1, a2, t00, t01, t02)
            t10, t11, t12 = _products(g, b0, b1, b2, t10, t11, t12)
            t20, t21, t22 = _products(g, c0, c1, c2, t20, t21, t22)
            a0, a1, a2 = c0, c1, c2
    base = ((pid_s * _idx(col_tiles, BIG) + pid_q) * PLANES + pl) * 9
    _partial(part_ptr, base, 0, t00, pl_ok)
    _partial(part_ptr, base, 1, t01, pl_ok)
    _partial(part_ptr, base, 2, t02, pl_ok)
    _partial(part_ptr, base, 3, t10, pl_ok)
    _partial(part_ptr, base, 4, t11, pl_ok)
    _partial(part_ptr, base, 5, t12, pl_ok)
    _partial(part_ptr, base, 6, t20, pl_ok)
    _partial(part_ptr, base, 7, t21, pl_ok)
    _partial(part_ptr, base, 8, t22, pl_ok)


_dwg_walk = Launcher(_dwg_walk_kernel)


def walk_weight_grad(
    a5: torch.Tensor, b5: torch.Tensor, dw: torch.Tensor, w5: torch.Tensor, r_g: int,
    stride: tuple[int, int], padding: tuple[int, int], dilation: tuple[int, int], big: bool,
) -> bool:  # fmt: skip
    """``dw`` (``w5`` its 5-D view ``[C, 1, 1, 3, 3]``) from ``a5`` (the summed tensor,
    ``[N, C, 1, OH, OW]``) and ``b5`` (the gathered one, ``[N, C, 1, H, W]``) through
    :func:`_dwg_walk_kernel`, or False where it does not serve the call (see the module
    docstring) or :data:`DWG_WALK` is off. ``big``: 64-bit offsets."""
    N, C, D, OH, OW = a5.shape
    H, W = b5.shape[3:]
    if not (
        DWG_WALK and r_g == 1 and D == 1 and b5.shape[2] == 1 and tuple(w5.shape[2:]) == (1, 3, 3)
        and w5.shape[0] == C and tuple(dilation) == (1, 1)
        and stride[0] in (1, 2) and stride[1] in (1, 2)
        and a5.dtype in (torch.float16, torch.bfloat16)
        and a5.stride(1) != 1 and b5.stride(1) != 1 and dw.is_contiguous()
        and OW >= dw_rows.DW_ROWS_MIN_WIDTH and N * C * OH * OW > 0
    ):  # fmt: skip
        return False
    bw, bpl, strip = dw_rows.walk_tiles(N * C, OH, OW, DWG_WALK_TILE, DWG_WALK_STRIP,
                                        _INTERPRETING)  # fmt: skip
    col_tiles, strips = cdiv(OW, bw), cdiv(OH, strip)
    splits = strips * col_tiles * N  # a partial a split, image, channel and tap
    target = split_target(dw, splits)
    big = big or splits * C * 9 >= 2**31 - 1
    _dwg_walk(
        (cdiv(N * C, bpl), col_tiles, strips),
        (a5, b5, target, N * C, C, H, W, OH, OW, padding[0], padding[1], strip, col_tiles,
         a5.stride(0), a5.stride(1), a5.stride(3), a5.stride(4),
         b5.stride(0), b5.stride(1), b5.stride(3), b5.stride(4)),
        SH=stride[0], SW=stride[1], BIG=big, BLOCK_PL=bpl, BLOCK_W=bw,
        num_warps=DWG_WALK_WARPS,
    )  # fmt: skip
    sum_split_target(target, dw)
    return True
