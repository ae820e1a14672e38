"""The Triton kernels of :mod:`opbench.kernels._lib.conv` and their launchers: the
implicit-GEMM forward (also transposed, hence every input gradient) and the weight
gradient. The choices of tiles, views and kernels are made there.

Both kernels walk the kernel's positions outside and channels inside: a kernel position
moves every output row (forward) or summed position (weight gradient) by the same offset,
so bounds are tested once per row and position, and a tile element costs one address add
and one AND. The kernels they replace (read as sm_90 PTX/SASS compiled on the CPU) did the
same in 64-bit integers (every size and stride an ``int64`` argument: ``mul.lo.s64`` and
a ``div.s64`` per kernel position; the weight gradient re-divided each step's positions
by the runtime output sizes in 64 bits, a ``CALL`` to the division routine in its loop,
255 registers and 248 bytes of spills on its probed 32x64x32 tiles: 1,313 instructions
a step for 24 loaded elements), and transposed NCHW tiles through shared memory before
the product: 0.88 ms at best where cuDNN takes 0.13 on the traced 3x3 convolution over
18 channels, 3.1 ms on its weight gradient. Here offsets are 32-bit unless a tensor
spans 2^31 elements (``BIG``: wrapped partial sums are exact modulo 2^32, so only a
valid element's final offset must fit), kernel sizes and strides are constexprs, and
over NCHW inputs the forward product is computed transposed (channels x positions), so
the gathered tile is the row-major ``B`` operand and the result is stored as it lies.
sm_90 SASS of the loops, NCHW f16: forward 128x32x32 tiles 455 instructions a step for
40 loaded elements, 128 registers (the old kernel's inner loop was 383 for 40 at 156
registers: the old forward's loop was not instruction-bound, so its H100 time, 5.5 ms
on these tiles against 0.88 on 32x32x16, points at latency and occupancy: one
synchronous gather per step; the probe decides); weight gradient 32x32x64 339 for 32
elements at 168 registers, no spills.

Only triton.language builtins inside the kernels (``tl.full``, not ``tl.zeros`` or
``tl.cdiv``): where Triton was imported before ``TRITON_INTERPRET`` was set, the
language's own ``@jit`` helpers are compiled-mode objects the interpreter cannot call
(see ``norm.sum_f``).
"""

from __future__ import annotations

import triton
import triton.language as tl

from opbench.kernels._lib.launch import Launcher, jit_unspecialized
from opbench.kernels._lib.matmul import dot_acc
from opbench.kernels._lib.proven import multiple

__all__ = ["_conv", "_wgrad"]


@triton.jit
def _idx(v, BIG: tl.constexpr):
    """A size or stride in the kernel's index type: 64-bit only where a tensor needs it.
    One return, the type chosen by a conditional expression (resolved at compile time):
    Triton 3.6 rejected the two-return form with BIG set ("Inconsistent return types:
    int64 and int32", the H100's run of test_conv_smallk's int64 case)."""
    return v.to(tl.int64 if BIG else tl.int32)


@triton.jit
def _idx5(s0, s1, s2, s3, s4, BIG: tl.constexpr):
    """:func:`_idx` of a 5-D tensor's strides (every tensor reaches the kernels as 5-D)."""
    return _idx(s0, BIG), _idx(s1, BIG), _idx(s2, BIG), _idx(s3, BIG), _idx(s4, BIG)


@triton.jit
def _unflatten(pos, D, H, W):
    """``(n, d, h, w)`` of flat positions ``pos`` over ``[N, D, H, W]`` (W fastest): the
    rows of the forward kernel's GEMM and the positions the weight gradient sums over."""
    w = pos % W
    t = pos // W
    h = t % H
    t = t // H
    return t // D, t % D, h, w


@triton.jit
def _kpos(kpos, KH: tl.constexpr, KW: tl.constexpr):
    """``(kd, kh, kw)`` of a flat kernel position (a scalar: divisions by constants)."""
    return kpos // (KH * KW), (kpos // KW) % KH, kpos % KW


# Like conv_kernels._wgrad_kernel's geometry arguments, kept apart: forward/input gradient
@jit_unspecialized
def _conv_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr,
    M: tl.int64, CIN_G: tl.int64, COUT_G: tl.int64,
    D: tl.int64, H: tl.int64, W: tl.int64, OD: tl.int64, OH: tl.int64, OW: tl.int64,
    pd: tl.int64, ph: tl.int64, pw: tl.int64, dd: tl.int64, dh: tl.int64, dw: tl.int64,
    xs0: tl.int64, xs1: tl.int64, xs2: tl.int64, xs3: tl.int64, xs4: tl.int64,
    ws0: tl.int64, ws1: tl.int64, ws2: tl.int64, ws3: tl.int64, ws4: tl.int64,
    ys0: tl.int64, ys1: tl.int64, ys2: tl.int64, ys3: tl.int64, ys4: tl.int64,
    KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr,
    SD: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
    TRANSPOSED: tl.constexpr, HAS_D: tl.constexpr, HAS_BIAS: tl.constexpr, IEEE: tl.constexpr,
    TO_F32: tl.constexpr, BIG: tl.constexpr, POS_COLS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    """``y[m, g*COUT_G + n] = sum over kernel positions and channels c of x[m moved by the
    kernel position, g*CIN_G + c] * w[n, c, kernel position]``.

    Kernel positions outside, the group's channels inside (``BLOCK_K`` at a time): a
    kernel position moves every row by the same offset, so bounds are tested per row
    (``BLOCK_M`` compares per position) and a tile element costs one add and one AND.
    Forward: input position ``o * stride - pad + k * dilation``. Transposed: output
    position ``o`` takes input ``(o + pad - k * dilation) / stride`` where exact (tested
    per row, by constexpr strides). ``POS_COLS`` (inputs whose positions are contiguous,
    NCHW): the product is computed transposed, ``acc[n, m] = w[n, :] @ x[:, m]``, so the
    gathered tile is a row-major ``[BLOCK_K, BLOCK_M]`` operand loaded where neighbouring
    threads read neighbouring positions, and stored without a transpose. ``HAS_D``: a
    real depth dim (else its terms are left out)."""
    pid_m = tl.program_id(0)
    pid_gn = tl.program_id(1)
    M = _idx(M, BIG)
    CIN_G = _idx(CIN_G, BIG)
    COUT_G = _idx(COUT_G, BIG)
    D, H, W = _idx(D, BIG), _idx(H, BIG), _idx(W, BIG)
    OD, OH, OW = _idx(OD, BIG), _idx(OH, BIG), _idx(OW, BIG)
    xs0, xs1, xs2, xs3, xs4 = _idx5(xs0, xs1, xs2, xs3, xs4, BIG)
    ws0, ws1, ws2, ws3, ws4 = _idx5(ws0, ws1, ws2, ws3, ws4, BIG)
    ys0, ys1, ys2, ys3, ys4 = _idx5(ys0, ys1, ys2, ys3, ys4, BIG)
    tiles_n = (COUT_G + BLOCK_N - 1) // BLOCK_N
    g = pid_gn // tiles_n
    pid_n = pid_gn - g * tiles_n

    rm = _idx(pid_m, BIG) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    m_ok = rm < M
    n_ok = rn < COUT_G
    nb, od, oh, ow = _unflatten(rm, OD, OH, OW)
    co = g * COUT_G + rn  # output channels of this tile
    # per-row base positions: the input position (forward) or its numerator (transposed)
    if TRANSPOSED:
        bd, bh, bw = od + _idx(pd, BIG), oh + _idx(ph, BIG), ow + _idx(pw, BIG)
    else:
        bd, bh, bw = od * SD - _idx(pd, BIG), oh * SH - _idx(ph, BIG), ow * SW - _idx(pw, BIG)
    row0 = nb * xs0 + g * CIN_G * xs1
    # the weight's per-column part: [C_out, C_in/g, k...] or transposed [C_in, C_out/g, k...]
    if TRANSPOSED:
        w_col = rn * ws1
        w_chan = (g * CIN_G + rk) * ws0
    else:
        w_col = co * ws0
        w_chan = rk * ws1
    c_step = BLOCK_K * ws0 if TRANSPOSED else BLOCK_K * ws1

    if POS_COLS:
        acc = tl.full([BLOCK_N, BLOCK_M], 0, tl.float32)
        comp = tl.full([BLOCK_N, BLOCK_M], 0, tl.float32)
    else:
        acc = tl.full([BLOCK_M, BLOCK_N], 0, tl.float32)
        comp = tl.full([BLOCK_M, BLOCK_N], 0, tl.float32)
    for kpos in range(0, KD * KH * KW):
        kd, kh, kw = _kpos(kpos, KH, KW)
        if TRANSPOSED:  # o + pad - k * dilation
            ih = bh - kh * _idx(dh, BIG)
            iw = bw - kw * _idx(dw, BIG)
            i_d = bd - kd * _idx(dd, BIG)
        else:
            ih = bh + kh * _idx(dh, BIG)
            iw = bw + kw * _idx(dw, BIG)
            i_d = bd + kd * _idx(dd, BIG)
        if TRANSPOSED and (SH != 1 or SW != 1 or SD != 1):  # the division must be exact
            ok = m_ok & (ih >= 0) & (iw >= 0) & (ih % SH == 0) & (iw % SW == 0)
            ih = tl.where(ok, ih, 0) // SH
            iw = tl.where(ok, iw, 0) // SW
            if HAS_D:
                ok = ok & (i_d >= 0) & (i_d % SD == 0)
                i_d = tl.where(ok, i_d, 0) // SD
        else:
            ok = m_ok & (ih >= 0) & (iw >= 0)
            if HAS_D:
                ok = ok & (i_d >= 0)
        ok = ok & (ih < H) & (iw < W)
        row = row0 + ih * xs3 + iw * xs4
        if HAS_D:
            ok = ok & (i_d < D)
            row += i_d * xs2
        w_base = w_chan + kd * ws2 + kh * ws3 + kw * ws4
        x_chan = rk * xs1
        for c0 in range(0, CIN_G, BLOCK_K):
            c_ok = (c0 + rk) < CIN_G
            if POS_COLS:
                xt = tl.load(x_ptr + x_chan[:, None] + row[None, :],
                             mask=c_ok[:, None] & ok[None, :], other=0.0)  # fmt: skip
                wt = tl.load(w_ptr + w_col[:, None] + w_base[None, :],
                             mask=n_ok[:, None] & c_ok[None, :], other=0.0)  # fmt: skip
                acc, comp = dot_acc(wt, xt, acc, comp, IEEE, TO_F32)
            else:
                a = tl.load(x_ptr + row[:, None] + x_chan[None, :],
                            mask=ok[:, None] & c_ok[None, :], other=0.0)  # fmt: skip
                w = tl.load(w_ptr + w_base[:, None] + w_col[None, :],
                            mask=c_ok[:, None] & n_ok[None, :], other=0.0)  # fmt: skip
                acc, comp = dot_acc(a, w, acc, comp, IEEE, TO_F32)
            x_chan += BLOCK_K * xs1
            w_base += c_step
    y_row = nb * ys0 + oh * ys3 + ow * ys4
    if HAS_D:
        y_row += od * ys2
    if POS_COLS:
        if HAS_BIAS:
            acc += tl.load(b_ptr + co, mask=n_ok, other=0.0).to(tl.float32)[:, None]
        tl.store(y_ptr + y_row[None, :] + co[:, None] * ys1, acc.to(y_ptr.dtype.element_ty),
                 mask=m_ok[None, :] & n_ok[:, None])  # fmt: skip
    else:
        if HAS_BIAS:
            acc += tl.load(b_ptr + co, mask=n_ok, other=0.0).to(tl.float32)[None, :]
        tl.store(y_ptr + y_row[:, None] + co[None, :] * ys1, acc.to(y_ptr.dtype.element_ty),
                 mask=m_ok[:, None] & n_ok[None, :])  # fmt: skip


# Like conv_kernels._conv_kernel's geometry arguments, kept apart: the weight gradient's
# own operands and split over positions
@jit_unspecialized
def _wgrad_kernel(
    a_ptr, b_ptr, dw_ptr,
    P: tl.int64, R_G: tl.int64, C_G: tl.int64,
    splits: tl.int64, p_per_q: tl.int64, s_split: tl.int64,
    PD: tl.int64, PH: tl.int64, PW: tl.int64, QD: tl.int64, QH: tl.int64, QW: tl.int64,
    pd: tl.int64, ph: tl.int64, pw: tl.int64, dd: tl.int64, dh: tl.int64, dw: tl.int64,
    as0: tl.int64, as1: tl.int64, as2: tl.int64, as3: tl.int64, as4: tl.int64,
    bs0: tl.int64, bs1: tl.int64, bs2: tl.int64, bs3: tl.int64, bs4: tl.int64,
    ws0: tl.int64, ws1: tl.int64, ws2: tl.int64, ws3: tl.int64, ws4: tl.int64,
    KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr,
    SD: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
    HAS_D: tl.constexpr, IEEE: tl.constexpr, TO_F32: tl.constexpr, BIG: tl.constexpr,
    B_POS_MAJOR: tl.constexpr, VEC_A: tl.constexpr, VEC_P: tl.constexpr,
    FLAT_TAPS: tl.constexpr, A_RUNS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    """dw[g*R_G + r, c, k] = sum over batch and positions q of A[n, g*R_G + r, q] *
    B[n, g*C_G + c, q * stride - padding + k * dilation] (zero outside B): the weight
    gradient of a convolution (A = grad_output, B = input, q over output positions) and
    of a transposed one (A = input, B = grad_output, q over input positions) alike.

    One kernel position per program (grid axis 2 runs over group, kernel position and
    split of the positions): rows are A's channels, columns B's, so a position's bounds
    are tested once per step and a tile element costs one add and one AND. Where B's
    positions are contiguous (NCHW) its tile is loaded ``[channels, positions]`` and
    multiplied transposed (the K-major operand tl.dot takes as it is). The positions'
    fp32 partials are summed in a fixed order by the caller.

    ``FLAT_TAPS``: the columns are (channel, kernel position) pairs instead, and grid axis
    2 runs over group and split alone: for a group of few channels of B (an RGB stem's
    3), whose per-position tiles pad 3 channels to ``tl.dot``'s 16 and read A once per
    kernel position (49 times for a 7x7 stem). Each B element then has its own bounds
    test, and its tile is loaded ``[positions, columns]``."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    gks = tl.program_id(2)
    P, R_G, C_G = _idx(P, BIG), _idx(R_G, BIG), _idx(C_G, BIG)
    PD, PH, PW = _idx(PD, BIG), _idx(PH, BIG), _idx(PW, BIG)
    QD, QH, QW = _idx(QD, BIG), _idx(QH, BIG), _idx(QW, BIG)
    as0, as1, as2, as3, as4 = _idx5(as0, as1, as2, as3, as4, BIG)
    bs0, bs1, bs2, bs3, bs4 = _idx5(bs0, bs1, bs2, bs3, bs4, BIG)
    ws0, ws1, ws2, ws3, ws4 = _idx5(ws0, ws1, ws2, ws3, ws4, BIG)
    if A_RUNS:  # the host's proof (VEC_A divides P and A's other strides, its column
        # stride is 1) restated as arithmetic Triton reads: A's runs then load as vectors
        # (sm_90: 2-byte loads without it; kernel_ptx.py)
        P, as0, as1 = multiple(P, VEC_A), multiple(as0, VEC_A), multiple(as1, VEC_A)
        as2, as3 = multiple(as2, VEC_A), multiple(as3, VEC_A)
        as4 = 1
    splits = _idx(splits, BIG)
    split = gks % splits
    t = gks // splits
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # rows: channels r of A's group
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # columns: channels c of B's group
    if FLAT_TAPS:  # columns: (channel, kernel position) pairs, the kernel position inner
        g = t
        kd, kh, kw = _kpos(rn % (KD * KH * KW), KH, KW)
        cc = rn // (KD * KH * KW)
        n_ok = rn < C_G * (KD * KH * KW)
    else:
        g = t // (KD * KH * KW)
        kd, kh, kw = _kpos(t % (KD * KH * KW), KH, KW)
        cc = rn
        n_ok = rn < C_G
    p_lo = split * _idx(p_per_q, BIG) * BLOCK_K
    rk = tl.arange(0, BLOCK_K)
    m_ok = rm < R_G
    ed = kd * _idx(dd, BIG) - _idx(pd, BIG)
    eh = kh * _idx(dh, BIG) - _idx(ph, BIG)
    ew = kw * _idx(dw, BIG) - _idx(pw, BIG)
    a_chan = (g * R_G + rm) * as1
    b_chan = (g * C_G + cc) * bs1 + eh * bs3 + ew * bs4
    if HAS_D:
        b_chan += ed * bs2
    acc = tl.full([BLOCK_M, BLOCK_N], 0, tl.float32)
    comp = tl.full([BLOCK_M, BLOCK_N], 0, tl.float32)
    for i in range(0, _idx(p_per_q, BIG)):  # a count: see matmul's K loop
        p = p_lo + i * BLOCK_K + rk
        p_ok = p < P
        nb, qd, qh, qw = _unflatten(p, QD, QH, QW)
        a_pos = nb * as0 + qh * as3 + qw * as4
        if HAS_D:
            a_pos += qd * as2
        # A's positions are neighbours in runs of VEC_A, B's in runs of VEC_P (the
        # caller's proof: unit column strides, the run divides the width; B's need a unit
        # convolution stride too): Triton 3.6 otherwise breaks the contiguity tie by the
        # first dim and puts the threads along the channels (every warp load 32 channel
        # planes apart; sm_90 32x32x64: 1,451 instructions a step for 32 loaded
        # elements). One hint for both left every strided convolution's A uncoalesced
        # (a 7x7 stride-2 stem's weight gradient: 55 ms on an H200, eager 0.68)
        if A_RUNS:
            a_pos = tl.multiple_of(a_pos, VEC_A)
        a_pos = tl.max_contiguous(a_pos, VEC_A)
        a = tl.load(a_ptr + a_chan[:, None] + a_pos[None, :],
                    mask=m_ok[:, None] & p_ok[None, :], other=0.0)  # fmt: skip
        b_pos = nb * bs0 + (qh * SH) * bs3 + (qw * SW) * bs4
        if HAS_D:
            b_pos += (qd * SD) * bs2
        b_pos = tl.max_contiguous(b_pos, VEC_P)
        if FLAT_TAPS:  # [positions, columns], each element's own bounds
            ih = (qh * SH)[:, None] + eh[None, :]
            iw = (qw * SW)[:, None] + ew[None, :]
            ok2 = p_ok[:, None] & n_ok[None, :] & (ih >= 0) & (ih < PH) & (iw >= 0) & (iw < PW)
            if HAS_D:
                i_d = (qd * SD)[:, None] + ed[None, :]
                ok2 = ok2 & (i_d >= 0) & (i_d < PD)
            b = tl.load(b_ptr + b_pos[:, None] + b_chan[None, :], mask=ok2, other=0.0)
            acc, comp = dot_acc(a, b, acc, comp, IEEE, TO_F32)
        else:
            ih = qh * SH + eh
            iw = qw * SW + ew
            ok = p_ok & (ih >= 0) & (ih < PH) & (iw >= 0) & (iw < PW)
            if HAS_D:
                i_d = qd * SD + ed
                ok = ok & (i_d >= 0) & (i_d < PD)
            if B_POS_MAJOR:  # NCHW: [channels, positions], neighbouring threads on positions
                bt = tl.load(b_ptr + b_chan[:, None] + b_pos[None, :],
                             mask=n_ok[:, None] & ok[None, :], other=0.0)  # fmt: skip
                acc, comp = dot_acc(a, tl.trans(bt), acc, comp, IEEE, TO_F32)
            else:
                b = tl.load(b_ptr + b_pos[:, None] + b_chan[None, :],
                            mask=ok[:, None] & n_ok[None, :], other=0.0)  # fmt: skip
                acc, comp = dot_acc(a, b, acc, comp, IEEE, TO_F32)
    offs = ((g * R_G + rm) * ws0)[:, None] + (cc * ws1 + kd * ws2 + kh * ws3 + kw * ws4)[None, :]
    # split partials (fp32) go to a workspace [splits, *dw], s_split apart
    tl.store(dw_ptr + split * _idx(s_split, BIG) + offs, acc.to(dw_ptr.dtype.element_ty),
             mask=m_ok[:, None] & n_ok[None, :])  # fmt: skip


_conv = Launcher(_conv_kernel)
_wgrad = Launcher(_wgrad_kernel)
