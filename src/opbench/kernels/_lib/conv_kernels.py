"""The Triton kernels of :mod:`opbench.kernels._lib.conv` and their launchers: the
implicit-GEMM forward (also transposed, hence every input gradient) and the two
weight-gradient kernels. The choices of tiles, views and kernels are made there.

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

__all__ = ["_conv", "_wgrad", "_wgrad_kpos"]


@triton.jit
def _unflatten(pos, D, H, W):
    """``(n, d, h, w)`` of flat positions ``pos`` over ``[N, D, H, W]`` (W fastest): the
    rows of the forward kernel's GEMM and the positions the weight gradient sums over."""
    w = pos % W
    t = pos // W
    h = t % H
    t = t // H
    return t // D, t % D, h, w


@jit_unspecialized
def _conv_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr,
    M: tl.int64, CIN_G: tl.int64, COUT_G: tl.int64, KVOL: tl.int64,
    D: tl.int64, H: tl.int64, W: tl.int64, OD: tl.int64, OH: tl.int64, OW: tl.int64,
    KH: tl.int64, KW: tl.int64,
    sd: tl.int64, sh: tl.int64, sw: tl.int64, pd: tl.int64, ph: tl.int64, pw: tl.int64,
    dd: tl.int64, dh: tl.int64, dw: tl.int64,
    xs0: tl.int64, xs1: tl.int64, xs2: tl.int64, xs3: tl.int64, xs4: tl.int64,
    ws0: tl.int64, ws1: tl.int64, ws2: tl.int64, ws3: tl.int64, ws4: tl.int64,
    ys0: tl.int64, ys1: tl.int64, ys2: tl.int64, ys3: tl.int64, ys4: tl.int64,
    TRANSPOSED: tl.constexpr, UNIT_STRIDE: tl.constexpr, HAS_BIAS: tl.constexpr,
    IEEE: tl.constexpr,
    TO_F32: tl.constexpr, X_POS_MAJOR: tl.constexpr, Y_POS_MAJOR: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    pid_m = tl.program_id(0).to(tl.int64)
    pid_gn = tl.program_id(1).to(tl.int64)
    tiles_n = (COUT_G + BLOCK_N - 1) // BLOCK_N
    g = pid_gn // tiles_n
    pid_n = pid_gn - g * tiles_n

    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    m_ok = rm < M
    n_ok = rn < COUT_G
    # output position of each row
    nb, od, oh, ow = _unflatten(rm, OD, OH, OW)
    co = g * COUT_G + rn  # output channels of this tile

    acc = tl.full([BLOCK_M, BLOCK_N], 0, tl.float32)
    comp = tl.full([BLOCK_M, BLOCK_N], 0, tl.float32)
    for kpos in range(0, KVOL):
        kw = kpos % KW
        kh = (kpos // KW) % KH
        kd = kpos // (KW * KH)
        if TRANSPOSED and UNIT_STRIDE:  # every offset lands on an input: no division
            i_d = od + pd - kd * dd
            i_h = oh + ph - kh * dh
            i_w = ow + pw - kw * dw
            ok = m_ok & (i_d >= 0) & (i_d < D) & (i_h >= 0) & (i_h < H) & (i_w >= 0) & (i_w < W)
        elif TRANSPOSED:
            td = od + pd - kd * dd
            th = oh + ph - kh * dh
            tw = ow + pw - kw * dw
            ok = m_ok & (td >= 0) & (th >= 0) & (tw >= 0)
            ok = ok & (td % sd == 0) & (th % sh == 0) & (tw % sw == 0)
            i_d = tl.where(ok, td, 0) // sd
            i_h = tl.where(ok, th, 0) // sh
            i_w = tl.where(ok, tw, 0) // sw
            ok = ok & (i_d < D) & (i_h < H) & (i_w < W)
        else:
            i_d = od * sd - pd + kd * dd
            i_h = oh * sh - ph + kh * dh
            i_w = ow * sw - pw + kw * dw
            ok = m_ok & (i_d >= 0) & (i_d < D) & (i_h >= 0) & (i_h < H) & (i_w >= 0) & (i_w < W)
        row = nb * xs0 + i_d * xs2 + i_h * xs3 + i_w * xs4
        wk = kd * ws2 + kh * ws3 + kw * ws4
        for c0 in range(0, CIN_G, BLOCK_K):
            c = c0 + rk
            c_ok = c < CIN_G
            cin = g * CIN_G + c
            if X_POS_MAJOR:  # NCHW: neighbouring positions are neighbours in memory
                a = tl.trans(tl.load(x_ptr + row[None, :] + cin[:, None] * xs1,
                                     mask=ok[None, :] & c_ok[:, None], other=0.0))  # fmt: skip
            else:
                a = tl.load(x_ptr + row[:, None] + cin[None, :] * xs1,
                            mask=ok[:, None] & c_ok[None, :], other=0.0)  # fmt: skip
            if TRANSPOSED:  # weight [C_in, C_out / groups, k...]
                w_offs = cin[:, None] * ws0 + rn[None, :] * ws1 + wk
            else:  # weight [C_out, C_in / groups, k...]
                w_offs = co[None, :] * ws0 + c[:, None] * ws1 + wk
            w = tl.load(w_ptr + w_offs, mask=c_ok[:, None] & n_ok[None, :], other=0.0)
            acc, comp = dot_acc(a, w, acc, comp, IEEE, TO_F32)
    if HAS_BIAS:
        acc += tl.load(b_ptr + co, mask=n_ok, other=0.0).to(tl.float32)[None, :]
    y_row = nb * ys0 + od * ys2 + oh * ys3 + ow * ys4
    if Y_POS_MAJOR:
        tl.store(y_ptr + y_row[None, :] + co[:, None] * ys1,
                 tl.trans(acc).to(y_ptr.dtype.element_ty),
                 mask=m_ok[None, :] & n_ok[:, None])  # fmt: skip
    else:
        tl.store(y_ptr + y_row[:, None] + co[None, :] * ys1, acc.to(y_ptr.dtype.element_ty),
                 mask=m_ok[:, None] & n_ok[None, :])  # fmt: skip


@jit_unspecialized
def _wgrad_kernel(
    a_ptr, b_ptr, dw_ptr,
    P: tl.int64, R_G: tl.int64, C_G: tl.int64, KVOL: tl.int64,
    splits: tl.int64, p_per_q: tl.int64, s_split: tl.int64,
    PD: tl.int64, PH: tl.int64, PW: tl.int64, QD: tl.int64, QH: tl.int64, QW: tl.int64,
    KH: tl.int64, KW: tl.int64,
    sd: tl.int64, sh: tl.int64, sw: tl.int64, pd: tl.int64, ph: tl.int64, pw: tl.int64,
    dd: tl.int64, dh: tl.int64, dw: tl.int64,
    as0: tl.int64, as1: tl.int64, as2: tl.int64, as3: tl.int64, as4: tl.int64,
    bs0: tl.int64, bs1: tl.int64, bs2: tl.int64, bs3: tl.int64, bs4: tl.int64,
    ws0: tl.int64, ws1: tl.int64, ws2: tl.int64, ws3: tl.int64, ws4: tl.int64,
    IEEE: tl.constexpr, TO_F32: tl.constexpr, B_POS_MAJOR: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    """dw[g*R_G + r, c, k] = sum over batch and positions q of A[n, g*R_G + r, q] *
    B[n, g*C_G + c, q * stride - padding + k * dilation] (zero outside B): the weight
    gradient of a convolution (A = grad_output, B = input, q over output positions) and
    of a transposed one (A = input, B = grad_output, q over input positions) alike."""
    pid_m = tl.program_id(0).to(tl.int64)
    pid_n = tl.program_id(1).to(tl.int64)
    gs = tl.program_id(2).to(tl.int64)  # group and split of the positions
    g = gs // splits
    split = gs - g * splits
    p_lo = split * p_per_q * BLOCK_K
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # rows: channels r of A's group
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # columns: (channel c, kernel position)
    rk = tl.arange(0, BLOCK_K)
    m_ok = rm < R_G
    n_ok = rn < C_G * KVOL
    c = rn // KVOL
    kpos = rn % KVOL
    kw = kpos % KW
    kh = (kpos // KW) % KH
    kd = kpos // (KW * KH)
    a_chan = (g * R_G + rm) * as1
    b_chan = (g * C_G + c) * bs1
    acc = tl.full([BLOCK_M, BLOCK_N], 0, tl.float32)
    comp = tl.full([BLOCK_M, BLOCK_N], 0, tl.float32)
    for i in range(0, p_per_q):  # a count: see matmul's K loop
        p = p_lo + i * BLOCK_K + rk
        p_ok = p < P
        nb, qd, qh, qw = _unflatten(p, QD, QH, QW)
        a = tl.load(a_ptr + a_chan[:, None] + (nb * as0 + qd * as2 + qh * as3 + qw * as4)[None, :],
                    mask=m_ok[:, None] & p_ok[None, :], other=0.0)  # fmt: skip
        i_d = qd[:, None] * sd - pd + kd[None, :] * dd
        i_h = qh[:, None] * sh - ph + kh[None, :] * dh
        i_w = qw[:, None] * sw - pw + kw[None, :] * dw
        ok = (i_d >= 0) & (i_d < PD) & (i_h >= 0) & (i_h < PH) & (i_w >= 0) & (i_w < PW)
        ok = ok & p_ok[:, None] & n_ok[None, :]
        b_offs = (nb * bs0)[:, None] + b_chan[None, :] + i_d * bs2 + i_h * bs3 + i_w * bs4
        if B_POS_MAJOR:  # NCHW: gather along positions (neighbours in memory) first
            b = tl.trans(tl.load(b_ptr + tl.trans(b_offs), mask=tl.trans(ok), other=0.0))
        else:
            b = tl.load(b_ptr + b_offs, mask=ok, other=0.0)
        acc, comp = dot_acc(a, b, acc, comp, IEEE, TO_F32)
    offs = ((g * R_G + rm) * ws0)[:, None] + (c * ws1 + kd * ws2 + kh * ws3 + kw * ws4)[None, :]
    # split partials (fp32) go to a workspace [splits, *dw], s_split apart
    tl.store(dw_ptr + split * s_split + offs, acc.to(dw_ptr.dtype.element_ty),
             mask=m_ok[:, None] & n_ok[None, :])  # fmt: skip


@jit_unspecialized
def _wgrad_kpos_kernel(
    a_ptr, b_ptr, dw_ptr,
    P: tl.int64, R_G: tl.int64, C_G: tl.int64, KVOL: tl.int64,
    splits: tl.int64, p_per_q: tl.int64, s_split: tl.int64,
    PD: tl.int64, PH: tl.int64, PW: tl.int64, QD: tl.int64, QH: tl.int64, QW: tl.int64,
    KH: tl.int64, KW: tl.int64,
    sd: tl.int64, sh: tl.int64, sw: tl.int64, pd: tl.int64, ph: tl.int64, pw: tl.int64,
    dd: tl.int64, dh: tl.int64, dw: tl.int64,
    as0: tl.int64, as1: tl.int64, as2: tl.int64, as3: tl.int64, as4: tl.int64,
    bs0: tl.int64, bs1: tl.int64, bs2: tl.int64, bs3: tl.int64, bs4: tl.int64,
    ws0: tl.int64, ws1: tl.int64, ws2: tl.int64, ws3: tl.int64, ws4: tl.int64,
    IEEE: tl.constexpr, TO_F32: tl.constexpr, B_POS_MAJOR: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    """:func:`_wgrad_kernel`'s sum with one kernel position per program: columns are
    channels only, so the gathered input's addresses are a 1-D position vector plus
    channel offsets (as in the forward kernel) instead of a 2-D index computation per
    ``[BLOCK_K, BLOCK_N]`` element. Grid axis 2 runs over (group, kernel position,
    split of the positions)."""
    pid_m = tl.program_id(0).to(tl.int64)
    pid_n = tl.program_id(1).to(tl.int64)
    gks = tl.program_id(2).to(tl.int64)
    split = gks % splits
    t = gks // splits
    kpos = t % KVOL
    g = t // KVOL
    kw = kpos % KW
    kh = (kpos // KW) % KH
    kd = kpos // (KW * KH)
    p_lo = split * p_per_q * BLOCK_K
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # rows: channels r of A's group
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # columns: channels c of B's group
    rk = tl.arange(0, BLOCK_K)
    m_ok = rm < R_G
    n_ok = rn < C_G
    a_chan = (g * R_G + rm) * as1
    b_chan = (g * C_G + rn) * bs1
    acc = tl.full([BLOCK_M, BLOCK_N], 0, tl.float32)
    comp = tl.full([BLOCK_M, BLOCK_N], 0, tl.float32)
    for i in range(0, p_per_q):  # a count: see matmul's K loop
        p = p_lo + i * BLOCK_K + rk
        p_ok = p < P
        nb, qd, qh, qw = _unflatten(p, QD, QH, QW)
        a = tl.load(a_ptr + a_chan[:, None] + (nb * as0 + qd * as2 + qh * as3 + qw * as4)[None, :],
                    mask=m_ok[:, None] & p_ok[None, :], other=0.0)  # fmt: skip
        i_d = qd * sd - pd + kd * dd
        i_h = qh * sh - ph + kh * dh
        i_w = qw * sw - pw + kw * dw
        ok = p_ok & (i_d >= 0) & (i_d < PD) & (i_h >= 0) & (i_h < PH) & (i_w >= 0) & (i_w < PW)
        row = nb * bs0 + i_d * bs2 + i_h * bs3 + i_w * bs4
        if B_POS_MAJOR:  # NCHW: neighbouring positions are neighbours in memory
            b = tl.trans(tl.load(b_ptr + row[None, :] + b_chan[:, None],
                                 mask=ok[None, :] & n_ok[:, None], other=0.0))  # fmt: skip
        else:
            b = tl.load(b_ptr + row[:, None] + b_chan[None, :],
                        mask=ok[:, None] & n_ok[None, :], other=0.0)  # fmt: skip
        acc, comp = dot_acc(a, b, acc, comp, IEEE, TO_F32)
    offs = ((g * R_G + rm) * ws0)[:, None] + (rn * ws1 + kd * ws2 + kh * ws3 + kw * ws4)[None, :]
    tl.store(dw_ptr + split * s_split + offs, acc.to(dw_ptr.dtype.element_ty),
             mask=m_ok[:, None] & n_ok[None, :])  # fmt: skip


_conv = Launcher(_conv_kernel)
_wgrad = Launcher(_wgrad_kernel)
_wgrad_kpos = Launcher(_wgrad_kpos_kernel)
