"""The weight gradient of a 1-D or 2-D depthwise convolution over NCHW-like planes on the
tensor cores: a row of taps at a time as one ``tl.dot`` whose diagonals are the taps.

For a weight row ``c`` and a kernel row ``kh``, every output row ``(n, oh)`` pairs A's row
``A[n, c, oh, :]`` (the summed tensor) with B's row ``B[n, c // R_G, ih, :]`` (the gathered
one, ``ih = oh * SH + kh * dh - ph``). Summed over those rows, the outer products give
``M[ow, iw] = sum over (n, oh) of A[.., ow] * B[.., iw]``, and the kernel row's taps are
its diagonals: ``dw[c, kh, kw] = sum over ow of M[ow, ow * SW + kw * dw - pw]``. ``M`` is a
``[BLOCK_Q, BLOCK_I]`` product over ``N * QH`` rows: a GEMM with a long K, computed by
``tl.dot`` from two row tiles loaded as they lie (each row contiguous), where the plane
kernel (:func:`~opbench.kernels._lib.conv_depthwise_wgrad._dwg_plane_kernel`) issues a
gathered load and an FMA for every tap of every element. Most of ``M`` is thrown away
(``BLOCK_I`` columns for ``KW`` taps): the tensor cores have that to spare, the load
units did not. The plane kernel ran the held-out half's ``[32, 728, 19, 19]`` 3x3 weight
gradient in 186 us on an H200 against cuDNN's 40; this one in 118 us, and 668 us against
1,273 on the ``[32, 768, 32, 32]`` 7x7 (``dwg-dot-h200-2026-11-29-tuning.json``, both
halves' rows, ``kernels_us``): faster on 15 of the 16 2-D NCHW depthwise rows measured
(level on ``[16, 168, 42, 42]``: 72.5 against 72.0), still 1.5-4x behind cuDNN on the 3x3
ones. Its loads are not vectors (a row of 19 or 42 elements is not 16-byte
aligned) and every kernel row reloads both tiles, so it stays bound by load instructions.
The same product turned around for the forward and input gradient (a banded matrix of
taps, ``y_rows = x_rows_kh @ T_kh``) lost to the direct kernel on every row: device
geomean 0.37x eager against 0.74x (``dw-dot-h200-2026-11-29.md``), since it loads as
many elements an output as the direct kernel's taps do; it was not kept.

A plane wider than ``BLOCK_Q`` output columns is cut into column blocks; the images are
split over programs where the rows, kernel rows and column blocks leave the GPU short
(:func:`~opbench.kernels._lib.conv_depthwise_wgrad.dwg_plane_splits`). Each block and
split writes its own fp32 partial, summed in a fixed order by
:func:`~opbench.kernels._lib.matmul_shared.sum_split_partials`: the same inputs give
the same bits. 16-bit inputs only: float32 keeps the plane kernel, whose compensated sums
hold the judge's float32 bound (``tl.dot`` would round to TF32).

Only triton.language builtins inside the kernel (``tl.full``, ``tl.reduce``):
``conv_kernels``' docstring says why.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import triton.language as tl

from opbench.kernels._lib.conv_kernels import _idx
from opbench.kernels._lib.launch import Launcher, cdiv, interpreted, jit_unspecialized, next_pow2
from opbench.kernels._lib.matmul import split_plan
from opbench.kernels._lib.matmul_shared import split_target, sum_split_target
from opbench.kernels._lib.reduction_kernels import _SUM_COMBINE

__all__ = ["DWG_DOT", "DWG_DOT_ROWS", "dot_blocks", "dot_weight_grad", "dot_serves"]

#: Route 1-D and 2-D, 16-bit, NCHW-like depthwise weight gradients here (else the plane
#: kernel).
DWG_DOT = True
#: Output rows ``(n, oh)`` a step of the product (its K), warps and pipeline stages, and
#: the widest block of output columns a program takes (a wider plane is cut into blocks).
#: Picked on the tuning half's 10 most used depthwise backward rows on an H200
#: (2026-11-29, ``benchmarks/results/dwg-dot-h200-2026-11-29-tuning.md``, device geomean
#: of the whole backward): 32 columns, 16 rows, 2 stages 0.523x eager against the plane
#: kernel's 0.465x (64 columns, 64 rows, 3 stages, the first guess: 0.319x; 32 x 32 x 2:
#: 0.473x; 16 columns x 32 rows: 0.502x); on the held-out half's 9 NCHW rows 0.732x
#: against the plane kernel's 0.668x.
DWG_DOT_ROWS = 16
DWG_DOT_WARPS = 4
DWG_DOT_STAGES = 2
DWG_DOT_MAX_Q = 32
#: Fewest steps of :data:`DWG_DOT_ROWS` rows a program must sum, else the plane kernel: a
#: program's end extracts ``KW`` diagonals of its whole ``[BLOCK_Q, BLOCK_I]`` product,
#: paid back only over enough rows. The tuning half's 1-D ``[1, 768, 512]`` (one image, a
#: row a channel; 9 taps) took 111 us here against the plane kernel's 19
#: (``dwg-dot-h200-2026-11-29-tuning.json``).
DWG_DOT_MIN_STEPS = 4
#: Widest block of input columns a product may need (else the plane kernel: a large
#: dilation or stride would waste most of the product).
DWG_DOT_MAX_I = 256


@jit_unspecialized
def _dwg_dot_kernel(
    a_ptr, b_ptr, dw_ptr,
    N: tl.int64, R_G: tl.int64, n_per_split: tl.int64, splits: tl.int64, s_split: tl.int64,
    PH: tl.int64, PW: tl.int64, QH: tl.int64, QW: tl.int64,
    ph: tl.int64, pw: tl.int64, dh: tl.int64, dw: tl.int64,
    as0: tl.int64, as1: tl.int64, as3: tl.int64, as4: tl.int64,
    bs0: tl.int64, bs1: tl.int64, bs3: tl.int64, bs4: tl.int64,
    ws0: tl.int64, ws3: tl.int64, ws4: tl.int64,
    KH: tl.constexpr, KW: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
    BIG: tl.constexpr, TO_F32: tl.constexpr,
    BLOCK_R: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_I: tl.constexpr,
):  # fmt: skip
    """``dw[c, 0, 0, kh, kw]`` (its partial over a column block and a split of the images)
    for ``c = program_id(0)``, ``kh`` and the column block from ``program_id(1)`` (``kh``
    fastest), the split from ``program_id(2)``. Partials (fp32) go to a workspace row
    ``block * splits + split`` (``s_split`` apart) where there are several."""
    c = _idx(tl.program_id(0), BIG)
    pid_t = tl.program_id(1)
    split = _idx(tl.program_id(2), BIG)
    kh = pid_t % KH
    q0 = _idx(pid_t // KH, BIG) * BLOCK_Q
    N, R_G, QH = _idx(N, BIG), _idx(R_G, BIG), _idx(QH, BIG)
    as0, as1, as3, as4 = _idx(as0, BIG), _idx(as1, BIG), _idx(as3, BIG), _idx(as4, BIG)
    bs0, bs1, bs3, bs4 = _idx(bs0, BIG), _idx(bs1, BIG), _idx(bs3, BIG), _idx(bs4, BIG)
    rq = tl.arange(0, BLOCK_Q)
    ri = tl.arange(0, BLOCK_I)
    q_ok = q0 + rq < QW
    iw = q0 * SW - _idx(pw, BIG) + ri  # the input columns the block's taps reach
    i_ok = (iw >= 0) & (iw < PW)
    eh = _idx(kh, BIG) * _idx(dh, BIG) - _idx(ph, BIG)
    n0 = split * _idx(n_per_split, BIG)
    rows = tl.minimum(_idx(n_per_split, BIG), N - n0) * QH
    a_cols = a_ptr + c * as1 + n0 * as0 + (q0 + rq) * as4  # [Q]
    b_cols = b_ptr + (c // R_G) * bs1 + n0 * bs0 + iw * bs4  # [I]
    acc = tl.full([BLOCK_Q, BLOCK_I], 0, tl.float32)
    for i in range(0, (rows + BLOCK_R - 1) // BLOCK_R):  # a count of steps
        r = i * BLOCK_R + tl.arange(0, BLOCK_R)
        nb = r // QH
        oh = r % QH
        ih = oh * SH + eh
        r_ok = (r < rows) & (ih >= 0) & (ih < PH)
        a = tl.load(a_cols[None, :] + (nb * as0 + oh * as3)[:, None],
                    mask=r_ok[:, None] & q_ok[None, :], other=0.0)  # fmt: skip
        b = tl.load(b_cols[None, :] + (nb * bs0 + ih * bs3)[:, None],
                    mask=r_ok[:, None] & i_ok[None, :], other=0.0)  # fmt: skip
        if TO_F32:  # the interpreter multiplies 16-bit arrays in their own precision
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(tl.trans(a), b, acc)
    row = _idx(pid_t // KH, BIG) * _idx(splits, BIG) + split
    out = dw_ptr + row * _idx(s_split, BIG) + c * _idx(ws0, BIG) + _idx(kh, BIG) * _idx(ws3, BIG)
    diag = ri[None, :] - rq[:, None] * SW  # [Q, I]: a column's offset from its row's first tap
    for kw in tl.static_range(KW):
        on = (diag == kw * dw) & q_ok[:, None]
        tap = tl.reduce(tl.reduce(tl.where(on, acc, 0.0), 1, _SUM_COMBINE), 0, _SUM_COMBINE)
        tl.store(out + kw * _idx(ws4, BIG), tap.to(dw_ptr.dtype.element_ty))


_dwg_dot = Launcher(_dwg_dot_kernel)
#: Tiles converted to fp32 before ``tl.dot`` under the interpreter.
_TO_F32 = interpreted(_dwg_dot_kernel)


def dot_blocks(qw: int, kw: int, stride: int, dilation: int) -> tuple[int, int]:
    """(BLOCK_Q, BLOCK_I): the output columns a program takes (the plane's width rounded
    up to a power of two, at least 16 for ``tl.dot``, at most :data:`DWG_DOT_MAX_Q`) and
    the input columns their taps reach, rounded up the same way."""
    bq = max(16, min(next_pow2(qw), DWG_DOT_MAX_Q))
    return bq, max(16, next_pow2((bq - 1) * stride + (kw - 1) * dilation + 1))


def dot_serves(
    a5: torch.Tensor, w5: torch.Tensor, stride: int, dilation: int, spatial: int
) -> bool:
    """Whether :func:`dot_weight_grad` takes this weight gradient: :data:`DWG_DOT` on,
    16-bit, at most 2-D, and a product no wider than :data:`DWG_DOT_MAX_I` columns."""
    if not DWG_DOT or spatial == 3 or a5.dtype not in (torch.float16, torch.bfloat16):
        return False
    return dot_blocks(a5.shape[4], w5.shape[4], stride, dilation)[1] <= DWG_DOT_MAX_I


def dot_weight_grad(
    a5: torch.Tensor, b5: torch.Tensor, dw: torch.Tensor, w5: torch.Tensor, r_g: int,
    stride: tuple[int, int], padding: tuple[int, int], dilation: tuple[int, int],
    big: bool, splits_for: Callable[[int, int], int],
) -> bool:  # fmt: skip
    """``dw`` (``w5`` its 5-D view ``[C, 1, 1, KH, KW]``) from ``a5`` (summed) and ``b5``
    (gathered), both 5-D with a depth of one; ``stride``, ``padding``, ``dilation`` as
    (rows, columns); ``splits_for(programs, images)``: how many splits of the images.
    False, launching nothing, where a program would sum fewer than
    :data:`DWG_DOT_MIN_STEPS` steps of rows."""
    N, QH, QW = a5.shape[0], a5.shape[3], a5.shape[4]
    KH, KW = w5.shape[3:]
    C = w5.shape[0]
    bq, bi = dot_blocks(QW, KW, stride[1], dilation[1])
    q_blocks = cdiv(QW, bq)
    splits, per = split_plan(C * KH * q_blocks, N, dw.device, splits_for(C * KH * q_blocks, N))
    if per * QH < DWG_DOT_MIN_STEPS * DWG_DOT_ROWS:
        return False
    rows = q_blocks * splits
    target = split_target(dw, rows)
    _dwg_dot(
        (C, KH * q_blocks, splits),
        (a5, b5, target, N, r_g, per, splits, dw.numel() if rows > 1 else 0,
         b5.shape[3], b5.shape[4], QH, QW, *padding, *dilation,
         a5.stride(0), a5.stride(1), a5.stride(3), a5.stride(4),
         b5.stride(0), b5.stride(1), b5.stride(3), b5.stride(4),
         w5.stride(0), w5.stride(3), w5.stride(4)),
        KH=KH, KW=KW, SH=stride[0], SW=stride[1], BIG=big, TO_F32=_TO_F32,
        BLOCK_R=DWG_DOT_ROWS, BLOCK_Q=bq, BLOCK_I=bi, num_warps=DWG_DOT_WARPS,
        num_stages=DWG_DOT_STAGES,
    )  # fmt: skip
    sum_split_target(target, dw)
    return True
