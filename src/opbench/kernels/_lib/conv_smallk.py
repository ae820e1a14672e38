"""Implicit-GEMM convolution for few channels a group (HRNet's 3x3 over 18 channels,
ResNeXt's 64 groups of 8): the reduction over (input channel, kernel position) walked as
one flattened dimension of ``CIN_G * KD * KH * KW`` instead of kernel positions outside
and channels (padded to 16 or 32) inside, so 18 channels x 9 taps pad 162 to 176 (tiles
of 16) instead of 9 x 32 = 288.

The channel count is a compile-time constant, so the steps over the flattened dimension
are unrolled and each reduction slot's channel and kernel position (the divisions by the
kernel's size) fold to constants in every thread (the gathered tile is
``[BLOCK_K, BLOCK_M]``, positions along the threads, the slots in each thread's
registers): a slot's input offset is ``c * xs1 + kd * (dd * xs2) + kh * (dh * xs3) +
kw * (dw * xs4)``, constants times four per-program products. Bounds: each row carries a
bitmask of the kernel positions that land inside the input (``vm``, built once per
program from the row's position), so a gathered element costs its address add and one
bit test; slots past the reduction's end are masked by a constant. Read as sm_90 SASS
(see :mod:`~opbench.kernels._lib.conv` for the numbers and the probe that times it).

Only NCHW-like inputs (positions contiguous, the kernel's rows on the threads: the
product is computed transposed, ``acc[n, m] = w[n, :] @ x[:, m]``, as in
``conv_kernels``), kernels of at most 31 positions (the row bitmask is an int32), dense
weight taps, and among transposed convolutions only those of unit stride (every input
gradient of a stride-1 convolution): those run as a forward convolution with negated
padding and dilation. ``conv`` routes the rest to ``conv_kernels``.
"""

from __future__ import annotations

import triton
import triton.language as tl

from opbench.kernels._lib.conv_kernels import _idx
from opbench.kernels._lib.launch import Launcher, jit_unspecialized
from opbench.kernels._lib.matmul import dot_acc

__all__ = ["_smallk"]


@triton.jit
def _row_bits(bd, bh, bw, ok, D, H, W, dd, dh, dw,
              KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr, HAS_D: tl.constexpr):  # fmt: skip
    """Bit ``(kd * KH + kh) * KW + kw`` of each row set where kernel position
    ``(kd, kh, kw)`` moves the row's base position ``(bd, bh, bw)`` to one inside the
    input (``ok`` False: no bits)."""
    vm = tl.where(ok, 0, 0)
    for kd in tl.static_range(KD):
        if HAS_D:
            okd = ok & (bd + kd * dd >= 0) & (bd + kd * dd < D)
        else:
            okd = ok
        for kh in tl.static_range(KH):
            okh = okd & (bh + kh * dh >= 0) & (bh + kh * dh < H)
            for kw in tl.static_range(KW):
                okw = okh & (bw + kw * dw >= 0) & (bw + kw * dw < W)
                vm = vm | (okw.to(tl.int32) << ((kd * KH + kh) * KW + kw))
    return vm


@jit_unspecialized
def _smallk_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr,
    M: tl.int64, COUT_G: tl.int64,
    D: tl.int64, H: tl.int64, W: tl.int64, OD: tl.int64, OH: tl.int64, OW: tl.int64,
    pd: tl.int64, ph: tl.int64, pw: tl.int64, dd: tl.int64, dh: tl.int64, dw: tl.int64,
    xs0: tl.int64, xs1: tl.int64, xs2: tl.int64, xs3: tl.int64, xs4: tl.int64,
    wsn: tl.int64, wsc: tl.int64, wsg: tl.int64, wst: tl.int64,
    ys0: tl.int64, ys1: tl.int64, ys2: tl.int64, ys3: tl.int64, ys4: tl.int64,
    CIN_G: tl.constexpr, KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr,
    SD: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr, K_STEPS: tl.constexpr,
    HAS_D: tl.constexpr, HAS_BIAS: tl.constexpr, IEEE: tl.constexpr, TO_F32: tl.constexpr,
    BIG: tl.constexpr, VEC_M: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    """``y[m, g*COUT_G + n] = sum over slots k = c * KVOL + t of x[m moved by kernel
    position t, g*CIN_G + c] * w[n, c, t]``, input position ``o * stride - pad + k *
    dilation`` (a unit-stride transposed convolution passes ``-pad`` and ``-dilation``).
    The weight element of (n, c, t) is at ``g * wsg + n * wsn + c * wsc + t * wst``
    (a forward weight ``[C_out, C_in/g, k...]`` or a transposed one ``[C_in, C_out/g,
    k...]``, taps dense). ``K_STEPS * BLOCK_K`` covers ``CIN_G * KVOL``."""
    pid_m = tl.program_id(0)
    pid_gn = tl.program_id(1)
    M, COUT_G = _idx(M, BIG), _idx(COUT_G, BIG)
    D, H, W = _idx(D, BIG), _idx(H, BIG), _idx(W, BIG)
    OD, OH, OW = _idx(OD, BIG), _idx(OH, BIG), _idx(OW, BIG)
    dd, dh, dw = _idx(dd, BIG), _idx(dh, BIG), _idx(dw, BIG)
    xs0, xs1, xs2 = _idx(xs0, BIG), _idx(xs1, BIG), _idx(xs2, BIG)
    xs3, xs4 = _idx(xs3, BIG), _idx(xs4, BIG)
    wsn, wsc, wst = _idx(wsn, BIG), _idx(wsc, BIG), _idx(wst, BIG)
    tiles_n = (COUT_G + BLOCK_N - 1) // BLOCK_N
    g = pid_gn // tiles_n
    pid_n = pid_gn - g * tiles_n

    rm = _idx(pid_m, BIG) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    m_ok = rm < M
    n_ok = rn < COUT_G
    ow = rm % OW
    t = rm // OW
    oh = t % OH
    t = t // OH
    od = t % OD
    nb = t // OD
    bd = od * SD - _idx(pd, BIG)
    bh = oh * SH - _idx(ph, BIG)
    bw = ow * SW - _idx(pw, BIG)
    vm = _row_bits(bd, bh, bw, m_ok, D, H, W, dd, dh, dw, KD, KH, KW, HAS_D)
    row = nb * xs0 + g * CIN_G * xs1 + bh * xs3 + bw * xs4
    if HAS_D:
        row += bd * xs2
    # rows are contiguous in aligned runs of VEC_M (the caller's proof: unit column
    # stride over the input, VEC_M divides the output width): what makes the coalescing
    # pass put the threads along the rows (Triton 3.6 breaks a tie by the first dim)
    row = tl.max_contiguous(row, VEC_M)
    # per-program products: a slot's offset is constants times these
    step_d = dd * xs2
    step_h = dh * xs3
    step_w = dw * xs4
    w_row = g * _idx(wsg, BIG) + rn * wsn

    acc = tl.full([BLOCK_N, BLOCK_M], 0, tl.float32)
    comp = tl.full([BLOCK_N, BLOCK_M], 0, tl.float32)
    for s in tl.static_range(K_STEPS):
        # unsigned: divisions by constants are a multiply-high and a shift (where a
        # slot is not a constant in a thread: the weight tile's layout)
        k = (s * BLOCK_K + tl.arange(0, BLOCK_K)).to(tl.uint32)
        c = (k // (KD * KH * KW)).to(tl.int32)
        tap = (k % (KD * KH * KW)).to(tl.int32)
        kh = ((k // KW) % KH).to(tl.int32)
        kw = (k % KW).to(tl.int32)
        k_ok = k < CIN_G * KD * KH * KW
        koff = c * xs1 + kh * step_h + kw * step_w
        if HAS_D:
            koff += (tap // (KH * KW)) * step_d
        ok = (((vm[None, :] >> tap[:, None]) & 1) != 0) & k_ok[:, None]
        xt = tl.load(x_ptr + koff[:, None] + row[None, :], mask=ok, other=0.0)
        wt = tl.load(w_ptr + w_row[:, None] + (c * wsc + tap * wst)[None, :],
                     mask=n_ok[:, None] & k_ok[None, :], other=0.0)  # fmt: skip
        acc, comp = dot_acc(wt, xt, acc, comp, IEEE, TO_F32)
    y_row = nb * _idx(ys0, BIG) + od * _idx(ys2, BIG) + oh * _idx(ys3, BIG) + ow * _idx(ys4, BIG)
    # the output's positions too (the caller's proof): stored along the threads, its
    # offsets computed in the gathered tile's row layout, not again per accumulator row
    y_row = tl.max_contiguous(y_row, VEC_M)
    co = g * COUT_G + rn
    if HAS_BIAS:
        acc += tl.load(b_ptr + co, mask=n_ok, other=0.0).to(tl.float32)[:, None]
    tl.store(y_ptr + y_row[None, :] + co[:, None] * _idx(ys1, BIG),
             acc.to(y_ptr.dtype.element_ty), mask=m_ok[None, :] & n_ok[:, None])  # fmt: skip


_smallk = Launcher(_smallk_kernel)
