"""The device side of :mod:`opbench.kernels._lib.softmax`: the short-row forward
(:func:`_softmax_kernel`) and backward (:func:`_softmax_bwd_kernel`, its one-tile rows in
:func:`_bwd_rows`) kernels and their launchers (``_forward``, ``_backward``). Which kernel
a call takes, its tiles, grid and arguments, the tuning constants (``--set softmax.NAME``)
and the ATen entry points are in :mod:`softmax`; nothing here reads them, so a value set
there reaches every launch through the constexprs it passes. Kept apart so the planner
reads without the device code (as :mod:`conv` and :mod:`conv_kernels`). The per-tile row
math these share with the long-row kernels (:func:`tile_max`, :func:`product`,
:func:`bwd_tile`) is in :mod:`softmax_long`; the strided-side addressing
(:func:`offsets`) and the row sum in :mod:`reduction_kernels`.

Only triton.language builtins inside the kernels (``tl.full``, not ``tl.zeros``; the row
sum through ``tl.reduce``): see :mod:`reduction_kernels`.
"""

from __future__ import annotations

import triton
import triton.language as tl

from opbench.kernels._lib.launch import Launcher
from opbench.kernels._lib.reduction_kernels import offsets, row_sum
from opbench.kernels._lib.softmax_long import bwd_tile, product, tile_max


@triton.jit(do_not_specialize=["M", "N", "md1", "xs0", "xs1", "os0", "os1", "xn", "on"])
def _softmax_kernel(
    x_ptr, o_ptr,
    M: tl.int64, N: tl.int64, md1: tl.int64,
    xs0: tl.int64, xs1: tl.int64, os0: tl.int64, os1: tl.int64,
    xn: tl.int64, on: tl.int64,
    LOG: tl.constexpr, COMPUTE: tl.constexpr, MODE_M: tl.constexpr, UNIT_N: tl.constexpr,
    SINGLE: tl.constexpr, VEC: tl.constexpr, VEC_N: tl.constexpr, IDX: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    # sizes and strides arrive divided by VEC: multiplied back, the compiler knows them
    # multiples of VEC and vectorises (reduction.vec_of); N arrives divided by VEC_N (VEC
    # for contiguous rows): without it the column mask ``cols < N`` is not provably
    # constant over a vector and every f16 element was loaded alone. The backward and
    # reduction_kernels' kernel repeat these lines for their own arguments: each kernel
    # takes its own tensors' strides, so they stay written out per kernel.
    M = M.to(IDX)
    N = N.to(IDX) * VEC_N
    md1 = md1.to(IDX) * VEC
    xs0 = xs0.to(IDX) * VEC
    xs1 = xs1.to(IDX) * VEC
    os0 = os0.to(IDX) * VEC
    os1 = os1.to(IDX) * VEC
    xn = xn.to(IDX) * VEC
    on = on.to(IDX) * VEC
    pid = tl.program_id(0).to(IDX)
    m = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    mask_m = m < M
    x_m = offsets(m, md1, xs0, xs1, MODE_M)[:, None]
    o_m = offsets(m, md1, os0, os1, MODE_M)[:, None]
    cols = tl.arange(0, BLOCK_N).to(IDX)
    if SINGLE:
        mask = mask_m[:, None] & (cols < N)[None, :]
        x_n = cols if UNIT_N else cols * xn
        o_n = cols if UNIT_N else cols * on
        v = tl.load(x_ptr + (x_m + x_n[None, :]), mask=mask, other=float("-inf")).to(COMPUTE)
        mx = tile_max(v)[:, None]
        e = tl.exp(v - mx)
        s = row_sum(e)[:, None]
        if LOG:
            y = v - mx - tl.log(s)
        else:
            y = e / s
        tl.store(o_ptr + (o_m + o_n[None, :]), y.to(o_ptr.dtype.element_ty), mask=mask)
    else:
        run_max = tl.full([BLOCK_M], float("-inf"), COMPUTE)
        run_sum = tl.full([BLOCK_M], 0, COMPUTE)
        for k in range(0, N, BLOCK_N):
            n = k + cols
            mask = mask_m[:, None] & (n < N)[None, :]
            x_n = n if UNIT_N else n * xn
            v = tl.load(x_ptr + (x_m + x_n[None, :]), mask=mask, other=float("-inf"))
            v = v.to(COMPUTE)
            new_max = tl.maximum(run_max, tile_max(v))
            # a max still at -inf (the row so far all -inf) would give -inf - -inf = NaN
            safe = tl.where(new_max == float("-inf"), 0.0, new_max)
            run_sum = run_sum * tl.exp(run_max - safe) + row_sum(tl.exp(v - safe[:, None]))
            run_max = new_max
        mx = run_max[:, None]
        log_sum = tl.log(run_sum)[:, None]
        inv_sum = 1.0 / run_sum[:, None]
        for k in range(0, N, BLOCK_N):
            n = k + cols
            mask = mask_m[:, None] & (n < N)[None, :]
            x_n = n if UNIT_N else n * xn
            o_n = n if UNIT_N else n * on
            v = tl.load(x_ptr + (x_m + x_n[None, :]), mask=mask, other=0.0).to(COMPUTE)
            if LOG:
                y = v - mx - log_sum
            else:
                y = tl.exp(v - mx) * inv_sum
            tl.store(o_ptr + (o_m + o_n[None, :]), y.to(o_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _bwd_rows(
    g_ptr, y_ptr, o_ptr, m, M, N, md1, gs0, gs1, ys0, ys1, os0, os1, gn, yn, on,
    LOG: tl.constexpr, COMPUTE: tl.constexpr, MODE_M: tl.constexpr, UNIT_N: tl.constexpr,
    IDX: tl.constexpr, BLOCK_N: tl.constexpr, PRODUCT_FIRST: tl.constexpr,
    ROUND: tl.constexpr,
):  # fmt: skip
    """The rows ``m`` of :func:`_softmax_bwd_kernel`, each whole in one ``BLOCK_N`` tile:
    grad and output loaded once, the row sum from registers, the result written."""
    dt = g_ptr.dtype.element_ty
    mask_m = m < M
    g_m = offsets(m, md1, gs0, gs1, MODE_M)[:, None]
    y_m = offsets(m, md1, ys0, ys1, MODE_M)[:, None]
    o_m = offsets(m, md1, os0, os1, MODE_M)[:, None]
    cols = tl.arange(0, BLOCK_N).to(IDX)
    mask = mask_m[:, None] & (cols < N)[None, :]
    g_n = cols if UNIT_N else cols * gn
    y_n = cols if UNIT_N else cols * yn
    o_n = cols if UNIT_N else cols * on
    # the loads of _softmax_bwd_kernel's looping second pass too; apart because that one
    # walks the row in BLOCK_N chunks after a pass for the row sum, this loads it once
    g = tl.load(g_ptr + (g_m + g_n[None, :]), mask=mask, other=0.0).to(COMPUTE)
    y = tl.load(y_ptr + (y_m + y_n[None, :]), mask=mask, other=0.0).to(COMPUTE)
    p = product(g, y, dt, ROUND)
    if LOG:
        dot = row_sum(g)[:, None]
    else:
        dot = row_sum(p)[:, None]
    r = bwd_tile(g, y, p, dot, LOG, PRODUCT_FIRST)
    tl.store(o_ptr + (o_m + o_n[None, :]), r.to(o_ptr.dtype.element_ty), mask=mask)


@triton.jit(
    do_not_specialize=[
        "M", "N", "md1", "gs0", "gs1", "ys0", "ys1", "os0", "os1", "gn", "yn", "on"
    ]
)  # fmt: skip
def _softmax_bwd_kernel(
    g_ptr, y_ptr, o_ptr,
    M: tl.int64, N: tl.int64, md1: tl.int64,
    gs0: tl.int64, gs1: tl.int64, ys0: tl.int64, ys1: tl.int64, os0: tl.int64, os1: tl.int64,
    gn: tl.int64, yn: tl.int64, on: tl.int64,
    LOG: tl.constexpr, COMPUTE: tl.constexpr, MODE_M: tl.constexpr, UNIT_N: tl.constexpr,
    SINGLE: tl.constexpr, VEC: tl.constexpr, VEC_N: tl.constexpr, IDX: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, PRODUCT_FIRST: tl.constexpr,
    ROUND: tl.constexpr, LOOP: tl.constexpr,
):  # fmt: skip
    """softmax: gi = y * (g - sum(g * y)); log_softmax: gi = g - exp(y) * sum(g).
    Sizes and strides arrive divided by VEC, and N by VEC_N (VEC for contiguous rows), as
    in :func:`_softmax_kernel`: a row length the compiler cannot prove a multiple of the
    vector splits the column mask, and every element was loaded alone (sm_90 PTX of the
    traced ``[1, 24, 512, 512]`` f16 plan: 64 ``ld.global.b16`` a thread, 125 registers).
    ``LOOP`` (rows in one tile only): 0, one tile of rows a program; else each program
    loops over every ``num_programs``-th tile, ``tl.range(num_stages=LOOP)`` (2 or more:
    the next tiles' loads in flight, cp.async into shared memory, while one is summed;
    :data:`BWD_PERSIST`)."""
    dt = g_ptr.dtype.element_ty
    # multiplied back as in _softmax_kernel (its own arguments: written out per kernel)
    M = M.to(IDX)
    N = N.to(IDX) * VEC_N
    md1 = md1.to(IDX) * VEC
    gs0 = gs0.to(IDX) * VEC
    gs1 = gs1.to(IDX) * VEC
    ys0 = ys0.to(IDX) * VEC
    ys1 = ys1.to(IDX) * VEC
    os0 = os0.to(IDX) * VEC
    os1 = os1.to(IDX) * VEC
    gn = gn.to(IDX) * VEC
    yn = yn.to(IDX) * VEC
    on = on.to(IDX) * VEC
    pid = tl.program_id(0).to(IDX)
    rows = tl.arange(0, BLOCK_M)
    if SINGLE and LOOP == 0:
        _bwd_rows(g_ptr, y_ptr, o_ptr, pid * BLOCK_M + rows, M, N, md1, gs0, gs1, ys0, ys1,
                  os0, os1, gn, yn, on, LOG, COMPUTE, MODE_M, UNIT_N, IDX, BLOCK_N,
                  PRODUCT_FIRST, ROUND)  # fmt: skip
    elif SINGLE:
        tiles = (M + (BLOCK_M - 1)) // BLOCK_M  # not tl.cdiv: a @jit helper (see test_norm)
        step = tl.num_programs(0).to(IDX)
        for t in tl.range(pid, tiles, step, num_stages=LOOP):
            _bwd_rows(g_ptr, y_ptr, o_ptr, t * BLOCK_M + rows, M, N, md1, gs0, gs1, ys0, ys1,
                      os0, os1, gn, yn, on, LOG, COMPUTE, MODE_M, UNIT_N, IDX, BLOCK_N,
                      PRODUCT_FIRST, ROUND)  # fmt: skip
    else:
        m = pid * BLOCK_M + rows
        mask_m = m < M
        g_m = offsets(m, md1, gs0, gs1, MODE_M)[:, None]
        y_m = offsets(m, md1, ys0, ys1, MODE_M)[:, None]
        o_m = offsets(m, md1, os0, os1, MODE_M)[:, None]
        cols = tl.arange(0, BLOCK_N).to(IDX)
        acc = tl.full([BLOCK_M, BLOCK_N], 0, COMPUTE)
        for k in range(0, N, BLOCK_N):
            n = k + cols
            mask = mask_m[:, None] & (n < N)[None, :]
            g_n = n if UNIT_N else n * gn
            g = tl.load(g_ptr + (g_m + g_n[None, :]), mask=mask, other=0.0).to(COMPUTE)
            if LOG:
                acc += g
            else:
                y_n = n if UNIT_N else n * yn
                y = tl.load(y_ptr + (y_m + y_n[None, :]), mask=mask, other=0.0).to(COMPUTE)
                acc += product(g, y, dt, ROUND)
        dot = row_sum(acc)[:, None]
        for k in range(0, N, BLOCK_N):
            n = k + cols
            mask = mask_m[:, None] & (n < N)[None, :]
            g_n = n if UNIT_N else n * gn
            y_n = n if UNIT_N else n * yn
            o_n = n if UNIT_N else n * on
            # as _bwd_rows' loads, but one chunk of a row read twice (see there)
            g = tl.load(g_ptr + (g_m + g_n[None, :]), mask=mask, other=0.0).to(COMPUTE)
            y = tl.load(y_ptr + (y_m + y_n[None, :]), mask=mask, other=0.0).to(COMPUTE)
            r = bwd_tile(g, y, product(g, y, dt, ROUND), dot, LOG, PRODUCT_FIRST)
            tl.store(o_ptr + (o_m + o_n[None, :]), r.to(o_ptr.dtype.element_ty), mask=mask)


_forward = Launcher(_softmax_kernel)
_backward = Launcher(_softmax_bwd_kernel)
