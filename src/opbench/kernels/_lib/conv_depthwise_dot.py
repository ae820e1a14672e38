"""Depthwise convolution over NCHW-like planes on the tensor cores: each kernel row is one
``tl.dot`` of an input row tile with a banded (Toeplitz) matrix of its taps.

For a channel ``c`` and a kernel row ``kh``, an output row ``(n, oh)`` is a sum over the
input row it reads (``ih = oh * SH + kh * DH - PH``) of that row's columns times the
row's taps: ``y[n, c, oh, ow] += sum over j of x[n, c, ih, j] * T[j, ow]`` with ``T[j, ow] =
w[c, kh, kw]`` where ``j = ow * SW + kw * DW - PW``, zero elsewhere. A tile of output rows
is then ``X_kh @ T_kh`` summed over ``kh``: ``KH`` products of ``[BLOCK_M, BLOCK_J] x
[BLOCK_J, BLOCK_O]``, the input rows loaded as they lie (each row contiguous) and ``T``
built in registers from the ``KW`` taps. A transposed convolution (the input gradient of
a depthwise one) is the same product with the relation turned around: input column
``j`` feeds output column ``j * SW + kw * DW - PW``, and an output row ``oh`` reads the
input row ``(oh + PH - kh * DH) / SH`` where that divides.

The direct kernel (:mod:`~opbench.kernels._lib.conv_depthwise`) issues a gathered load
and an FMA for every tap of every element: on an H200 it ran the input gradient of the
held-out half's ``[32, 728, 19, 19]`` 3x3 depthwise convolution in 70 us against cuDNN's
20 (``conv-heldout-h200-2026-11-29-defaults.json``, ``kernels_us``). Here most of ``T``
is zeros (``BLOCK_J`` columns for ``KW`` taps): the tensor cores have that to spare.

Served: 16-bit, 1-D or 2-D, one input channel an output channel (no channel multiplier),
positions contiguous, and a band no wider than :data:`DW_DOT_MAX_J` columns; the rest
keeps the direct kernel. Only triton.language builtins inside the kernel:
``conv_kernels``' docstring says why.
"""

from __future__ import annotations

import torch
import triton.language as tl

from opbench.kernels._lib.conv_kernels import _idx
from opbench.kernels._lib.launch import Launcher, cdiv, interpreted, jit_unspecialized, next_pow2

__all__ = ["DW_DOT", "DW_DOT_ROWS", "dot_depthwise", "dw_dot_blocks", "dw_dot_serves"]

#: Route the served depthwise convolutions here (else the direct kernel).
DW_DOT = True
#: Output rows ``(n, oh)`` a program (the product's M), its warps and pipeline stages.
DW_DOT_ROWS = 64
DW_DOT_WARPS = 4
DW_DOT_STAGES = 2
#: Widest block of output columns a program takes, and widest band of input columns its
#: product may span (else the direct kernel: a wide stride or dilation would waste most
#: of the product).
DW_DOT_MAX_O = 64
DW_DOT_MAX_J = 256


@jit_unspecialized
def _dw_dot_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr,
    R: tl.int64, H: tl.int64, W: tl.int64, OH: tl.int64, OW: tl.int64, o_blocks: tl.int64,
    ph: tl.int64, pw: tl.int64, dh: tl.int64, dw: tl.int64,
    xs0: tl.int64, xs1: tl.int64, xs3: tl.int64, xs4: tl.int64,
    ws0: tl.int64, ws3: tl.int64, ws4: tl.int64,
    ys0: tl.int64, ys1: tl.int64, ys3: tl.int64, ys4: tl.int64,
    KH: tl.constexpr, KW: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
    TRANSPOSED: tl.constexpr, HAS_BIAS: tl.constexpr, BIG: tl.constexpr, TO_F32: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_O: tl.constexpr, BLOCK_J: tl.constexpr,
):  # fmt: skip
    """``y[n, c, oh, o0:o0 + BLOCK_O]`` for ``BLOCK_M`` output rows ``r = (n, oh)`` (``R``
    of them) of channel ``c = program_id(1)``; ``program_id(0)`` is the row tile times
    ``o_blocks`` plus the column block (neighbouring programs share their rows' halo)."""
    pid = tl.program_id(0)
    c = _idx(tl.program_id(1), BIG)
    R, OH = _idx(R, BIG), _idx(OH, BIG)
    xs0, xs1, xs3, xs4 = _idx(xs0, BIG), _idx(xs1, BIG), _idx(xs3, BIG), _idx(xs4, BIG)
    ys0, ys1, ys3, ys4 = _idx(ys0, BIG), _idx(ys1, BIG), _idx(ys3, BIG), _idx(ys4, BIG)
    o0 = _idx(pid % o_blocks, BIG) * BLOCK_O
    r = _idx(pid // o_blocks, BIG) * BLOCK_M + tl.arange(0, BLOCK_M)
    r_ok = r < R
    nb = r // OH
    oh = r % OH
    ro = tl.arange(0, BLOCK_O)
    rj = tl.arange(0, BLOCK_J)
    if TRANSPOSED:  # the first input column feeding the block: floor((o0 + pw - reach) / SW)
        t = o0 + _idx(pw, BIG) - (KW - 1) * _idx(dw, BIG)
        j0 = tl.where(t >= 0, t // SW, -((SW - 1 - t) // SW))
        jx = j0 + rj  # [J]: input columns
        tap = (o0 + ro)[None, :] + _idx(pw, BIG) - jx[:, None] * SW  # [J, O]: kw * dw
    else:
        jx = o0 * SW - _idx(pw, BIG) + rj
        tap = rj[:, None] - ro[None, :] * SW
    j_ok = (jx >= 0) & (jx < W)
    kw = tap // _idx(dw, BIG)
    t_ok = (tap >= 0) & (kw * _idx(dw, BIG) == tap) & (kw < KW)
    x_rows = x_ptr + c * xs1 + nb * xs0  # [M]
    w_row = w_ptr + c * _idx(ws0, BIG) + kw * _idx(ws4, BIG)  # [J, O]
    acc = tl.full([BLOCK_M, BLOCK_O], 0, tl.float32)
    for kh in tl.static_range(KH):
        if TRANSPOSED:
            num = oh + _idx(ph, BIG) - kh * _idx(dh, BIG)
            ih = num // SH
            ok = r_ok & (num >= 0) & (ih * SH == num) & (ih < H)
        else:
            ih = oh * SH + kh * _idx(dh, BIG) - _idx(ph, BIG)
            ok = r_ok & (ih >= 0) & (ih < H)
        x = tl.load((x_rows + ih * xs3)[:, None] + (jx * xs4)[None, :],
                    mask=ok[:, None] & j_ok[None, :], other=0.0)  # fmt: skip
        t = tl.load(w_row + kh * _idx(ws3, BIG), mask=t_ok, other=0.0)
        if TO_F32:  # the interpreter multiplies 16-bit arrays in their own precision
            x = x.to(tl.float32)
            t = t.to(tl.float32)
        acc = tl.dot(x, t, acc)
    if HAS_BIAS:
        acc += tl.load(b_ptr + c).to(tl.float32)
    o_ok = (o0 + ro) < OW
    out = y_ptr + c * ys1 + (nb * ys0 + oh * ys3)[:, None] + ((o0 + ro) * ys4)[None, :]
    tl.store(out, acc.to(y_ptr.dtype.element_ty), mask=r_ok[:, None] & o_ok[None, :])


_dw_dot = Launcher(_dw_dot_kernel)
#: Tiles converted to fp32 before ``tl.dot`` under the interpreter.
_TO_F32 = interpreted(_dw_dot_kernel)


def dw_dot_blocks(
    ow: int, kw: int, stride: int, dilation: int, transposed: bool
) -> tuple[int, int]:
    """(BLOCK_O, BLOCK_J): the output columns a program takes (the output's width rounded
    up to a power of two, 16 to :data:`DW_DOT_MAX_O`) and the input columns their taps
    span, rounded up the same way (at least 16, ``tl.dot``'s least)."""
    bo = max(16, min(next_pow2(ow), DW_DOT_MAX_O))
    reach = (kw - 1) * dilation
    span = (bo - 1 + reach) // stride + 2 if transposed else (bo - 1) * stride + reach + 1
    return bo, max(16, next_pow2(span))


def dw_dot_serves(x5: torch.Tensor, w5: torch.Tensor, y5: torch.Tensor, cin_g: int,
                  cout_g: int, stride: int, dilation: int, transposed: bool) -> bool:  # fmt: skip
    """Whether :func:`dot_depthwise` takes this convolution (5-D views): :data:`DW_DOT`
    on, 16-bit, no depth, one channel a group on both sides, both planes' positions
    contiguous, a band no wider than :data:`DW_DOT_MAX_J`."""
    if not DW_DOT or x5.dtype not in (torch.float16, torch.bfloat16) or cin_g != 1:
        return False
    if cout_g != 1 or x5.shape[2] != 1 or y5.shape[2] != 1 or w5.shape[2] != 1:
        return False
    if x5.stride(4) != 1 or y5.stride(4) != 1 or x5.shape[1] == 1:
        return False
    blocks = dw_dot_blocks(y5.shape[4], w5.shape[4], stride, dilation, transposed)
    return blocks[1] <= DW_DOT_MAX_J


def dot_depthwise(
    x5: torch.Tensor, w5: torch.Tensor, bias: torch.Tensor | None, y5: torch.Tensor,
    stride: tuple[int, int], padding: tuple[int, int], dilation: tuple[int, int],
    transposed: bool, big: bool,
) -> None:  # fmt: skip
    """``y5`` from ``x5`` and ``w5`` (5-D views with a depth of one; ``w5`` ``[C, 1, 1,
    KH, KW]``); ``stride``, ``padding``, ``dilation`` as (rows, columns)."""
    N, C = x5.shape[:2]
    OH, OW = y5.shape[3:]
    KH, KW = w5.shape[3:]
    bo, bj = dw_dot_blocks(OW, KW, stride[1], dilation[1], transposed)
    o_blocks = cdiv(OW, bo)
    rows = N * OH
    _dw_dot(
        (cdiv(rows, DW_DOT_ROWS) * o_blocks, C),
        (x5, w5, bias if bias is not None else y5, y5, rows, x5.shape[3], x5.shape[4], OH, OW,
         o_blocks, *padding, *dilation, x5.stride(0), x5.stride(1), x5.stride(3), x5.stride(4),
         w5.stride(0), w5.stride(3), w5.stride(4),
         y5.stride(0), y5.stride(1), y5.stride(3), y5.stride(4)),
        KH=KH, KW=KW, SH=stride[0], SW=stride[1], TRANSPOSED=transposed,
        HAS_BIAS=bias is not None, BIG=big, TO_F32=_TO_F32, BLOCK_M=DW_DOT_ROWS, BLOCK_O=bo,
        BLOCK_J=bj, num_warps=DW_DOT_WARPS, num_stages=DW_DOT_STAGES,
    )  # fmt: skip
