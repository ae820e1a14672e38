"""Softmax and log-softmax over long contiguous rows (more than
:data:`opbench.kernels._lib.softmax.SINGLE_MAX` elements), forward and backward: one
program a row, the row's body loaded as 16-byte vectors whatever its alignment; and the
per-tile row math (:func:`tile_max`, :func:`product`, :func:`bwd_tile`) that these and
the short-row kernels of :mod:`opbench.kernels._lib.softmax_kernels` share (this module
imports nothing of those, so the short-row kernels import these from here).

* One program a row (:func:`_softmax_long_kernel`, :func:`_softmax_bwd_long_kernel`),
  which aligns the row's body to 16 bytes whatever the row's start (a row of 50,265 f16
  starts aligned one time in eight; before, those rows were loaded an element at a
  time: ``[1024, 50265]`` f16 log_softmax 167 us on the H100, eager 101; the backward
  200 us, eager 148).
* Forward: one read for the statistics (an online pass: a running max and a running sum
  rescaled to it), then one read and one write for the output. Backward: one read for
  the row's sum, then one read and one write for the result.

:func:`long_args` builds the launch; :mod:`softmax`'s planner decides which rows come
here and with what tile (:data:`LONG_TILE_BYTES`, :data:`LONG_WARPS`).
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from opbench.kernels._lib.launch import Launcher
from opbench.kernels._lib.pointwise import index_type
from opbench.kernels._lib.reduction import offsets, row_sum

__all__ = [
    "LONG_TILE_BYTES",
    "LONG_WARPS",
    "LONG_COLS",
    "tile_max",
    "product",
    "bwd_tile",
    "long_args",
]

#: The standard library's combine functions (see :mod:`reduction`: the interpreter
#: reduces with numpy only through these).
_SUM_COMBINE = tl.standard._sum_combine
_MAX_COMBINE = tl.standard._elementwise_max

#: Long rows: tile bytes (8,192 f16 elements: four 16-byte vectors a thread) and warps.
LONG_TILE_BYTES = 16384
LONG_WARPS = 8
#: Long rows: elements per tile row, over which the running max and sum are kept (a
#: reduction within 2-4 lanes a tile instead of one across the program).
LONG_COLS = 16


# ----------------------------------------------------------------------------- kernels


@triton.jit
def tile_max(x):
    """Max over axis 1 of a 2-D tile. A NaN may be skipped here (``maximum`` ignores
    NaN on the GPU): it still reaches the row's exp-sum, which makes the whole row NaN,
    as in eager, so the max needs no second (NaN-counting) reduction."""
    return tl.reduce(x, 1, _MAX_COMBINE)


@triton.jit
def product(g, y, dt, ROUND: tl.constexpr):
    """softmax backward's ``g * y``; ROUND (CUDA): rounded to the gradient's dtype ``dt``
    first, as CUDA eager, which computes ``tmp = grad * output`` as a tensor op and sums
    and subtracts ``tmp`` (``softmax_backward_cuda_out``, ``SoftMaxBackwardEpilogue``)."""
    p = g * y
    if ROUND:
        p = p.to(dt).to(g.dtype)
    return p


@triton.jit
def bwd_tile(g, y, p, dot, LOG: tl.constexpr, PRODUCT_FIRST: tl.constexpr):
    """``PRODUCT_FIRST``: softmax's ``p - y * dot`` (``p`` from :func:`product`), the
    order CUDA eager rounds in on every path; else ``y * (g - dot)``. They differ by
    several bf16 ulps where ``g`` and ``dot`` nearly cancel."""
    if LOG:
        r = g - tl.exp(y) * dot
    elif PRODUCT_FIRST:
        r = p - y * dot
    else:
        r = y * (g - dot)
    return r


@triton.jit(do_not_specialize=["N", "md1", "xs0", "xs1", "os0", "os1"])
def _softmax_long_kernel(
    x_ptr, o_ptr,
    N: tl.int64, md1: tl.int64, xs0: tl.int64, xs1: tl.int64, os0: tl.int64, os1: tl.int64,
    LOG: tl.constexpr, COMPUTE: tl.constexpr, MODE_M: tl.constexpr, ALIGN: tl.constexpr,
    IDX: tl.constexpr, ROWS: tl.constexpr, COLS: tl.constexpr,
):  # fmt: skip
    """One long contiguous row per program, at any alignment: 16-byte loads need a row
    start the compiler can prove 16-byte aligned, which a row of 50,265 f16 is only one
    time in eight. The row is cut into a head (up to the first ``ALIGN``-aligned
    element, fewer than ``ALIGN`` elements), a body of whole ``ALIGN`` groups (loaded
    as vectors from ``(row + ALIGN - 1) // ALIGN * ALIGN``, which the compiler knows
    aligned) and a tail; head and tail go in one small masked tile. The output's rows
    sit at the same offsets modulo ``ALIGN`` (the plan checks; else ``ALIGN`` is 1).

    One read for the statistics (an online pass: a running max and a running sum
    rescaled to it per tile row of ``COLS`` elements, so a tile costs a reduction
    within a few lanes and no barrier, and one exp per element), then one read (the row
    was read just before: mostly L2) and one write for the output."""
    N = N.to(IDX)
    pid = tl.program_id(0).to(IDX)
    x_row = offsets(pid, md1.to(IDX), xs0.to(IDX), xs1.to(IDX), MODE_M)
    o_row = offsets(pid, md1.to(IDX), os0.to(IDX), os1.to(IDX), MODE_M)
    x_body = (x_row + (ALIGN - 1)) // ALIGN * ALIGN
    o_body = (o_row + (ALIGN - 1)) // ALIGN * ALIGN
    head = tl.minimum(x_body - x_row, N)
    body = (N - head) // ALIGN * ALIGN
    TILE: tl.constexpr = ROWS * COLS
    idx = (tl.arange(0, ROWS)[:, None] * COLS + tl.arange(0, COLS)[None, :]).to(IDX)
    r_max = tl.full([ROWS], float("-inf"), COMPUTE)
    r_sum = tl.full([ROWS], 0, COMPUTE)
    for k in range(0, body, TILE):
        n = k + idx
        v = tl.load(x_ptr + (x_body + n), mask=n < body, other=float("-inf")).to(COMPUTE)
        new_max = tl.maximum(r_max, tile_max(v))
        # a max still at -inf (the row so far all -inf) would give -inf - -inf = NaN
        safe = tl.where(new_max == float("-inf"), 0.0, new_max)
        r_sum = r_sum * tl.exp(r_max - safe) + row_sum(tl.exp(v - safe[:, None]))
        r_max = new_max
    # head (j < ALIGN) and tail (j >= ALIGN) elements
    j = tl.arange(0, 2 * ALIGN).to(IDX)
    in_head = j < ALIGN
    pos = tl.where(in_head, j, head + body + j - ALIGN)
    edge = tl.where(in_head, j < head, j - ALIGN < N - head - body)
    e = tl.load(x_ptr + (x_row + pos), mask=edge, other=float("-inf")).to(COMPUTE)
    e_max = tl.reduce(e, 0, _MAX_COMBINE)
    e_safe = tl.where(e_max == float("-inf"), 0.0, e_max)
    e_sum = tl.reduce(tl.exp(e - e_safe), 0, _SUM_COMBINE)
    mx = tl.maximum(tl.reduce(r_max, 0, _MAX_COMBINE), e_max)
    safe = tl.where(mx == float("-inf"), 0.0, mx)
    total = tl.reduce(r_sum * tl.exp(r_max - safe), 0, _SUM_COMBINE)
    total += e_sum * tl.exp(e_max - safe)
    log_sum = tl.log(total)
    inv_sum = 1.0 / total
    for k in range(0, body, TILE):
        n = k + idx
        mask = n < body
        v = tl.load(x_ptr + (x_body + n), mask=mask, other=0.0).to(COMPUTE)
        if LOG:
            y = v - mx - log_sum
        else:
            y = tl.exp(v - mx) * inv_sum
        tl.store(o_ptr + (o_body + n), y.to(o_ptr.dtype.element_ty), mask=mask)
    if LOG:
        y = e - mx - log_sum
    else:
        y = tl.exp(e - mx) * inv_sum
    tl.store(o_ptr + (o_row + pos), y.to(o_ptr.dtype.element_ty), mask=edge)


# Its row set-up (offsets, aligned head and body) is _softmax_long_kernel's for three
# tensors instead of two, kept apart: Triton inlines no helper that returns this many
# values as cheaply as it compiles them in place.
@triton.jit(do_not_specialize=["N", "md1", "gs0", "gs1", "ys0", "ys1", "os0", "os1"])
def _softmax_bwd_long_kernel(
    g_ptr, y_ptr, o_ptr,
    N: tl.int64, md1: tl.int64, gs0: tl.int64, gs1: tl.int64, ys0: tl.int64, ys1: tl.int64,
    os0: tl.int64, os1: tl.int64,
    LOG: tl.constexpr, COMPUTE: tl.constexpr, MODE_M: tl.constexpr, ALIGN: tl.constexpr,
    IDX: tl.constexpr, ROWS: tl.constexpr, COLS: tl.constexpr, ROUND: tl.constexpr,
):  # fmt: skip
    """The backward of one long contiguous row a program, cut into head, 16-byte aligned
    body and tail as in :func:`_softmax_long_kernel` (grad, output and result rows at
    the same offsets modulo ``ALIGN``, else ``ALIGN`` 1): one pass for the row's sum,
    one for the result."""
    N = N.to(IDX)
    pid = tl.program_id(0).to(IDX)
    d1 = md1.to(IDX)
    g_row = offsets(pid, d1, gs0.to(IDX), gs1.to(IDX), MODE_M)
    y_row = offsets(pid, d1, ys0.to(IDX), ys1.to(IDX), MODE_M)
    o_row = offsets(pid, d1, os0.to(IDX), os1.to(IDX), MODE_M)
    g_body = (g_row + (ALIGN - 1)) // ALIGN * ALIGN
    y_body = (y_row + (ALIGN - 1)) // ALIGN * ALIGN
    o_body = (o_row + (ALIGN - 1)) // ALIGN * ALIGN
    head = tl.minimum(g_body - g_row, N)
    body = (N - head) // ALIGN * ALIGN
    TILE: tl.constexpr = ROWS * COLS
    idx = (tl.arange(0, ROWS)[:, None] * COLS + tl.arange(0, COLS)[None, :]).to(IDX)
    acc = tl.full([ROWS, COLS], 0, COMPUTE)
    for k in range(0, body, TILE):
        n = k + idx
        mask = n < body
        g = tl.load(g_ptr + (g_body + n), mask=mask, other=0.0).to(COMPUTE)
        if LOG:
            acc += g
        else:
            y = tl.load(y_ptr + (y_body + n), mask=mask, other=0.0).to(COMPUTE)
            acc += product(g, y, g_ptr.dtype.element_ty, ROUND)
    j = tl.arange(0, 2 * ALIGN).to(IDX)
    in_head = j < ALIGN
    pos = tl.where(in_head, j, head + body + j - ALIGN)
    edge = tl.where(in_head, j < head, j - ALIGN < N - head - body)
    eg = tl.load(g_ptr + (g_row + pos), mask=edge, other=0.0).to(COMPUTE)
    ey = tl.load(y_ptr + (y_row + pos), mask=edge, other=0.0).to(COMPUTE)
    if LOG:
        e_acc = eg
    else:
        e_acc = product(eg, ey, g_ptr.dtype.element_ty, ROUND)
    dot = tl.reduce(row_sum(acc), 0, _SUM_COMBINE) + tl.reduce(e_acc, 0, _SUM_COMBINE)
    for k in range(0, body, TILE):
        n = k + idx
        mask = n < body
        g = tl.load(g_ptr + (g_body + n), mask=mask, other=0.0).to(COMPUTE)
        y = tl.load(y_ptr + (y_body + n), mask=mask, other=0.0).to(COMPUTE)
        r = bwd_tile(g, y, product(g, y, g_ptr.dtype.element_ty, ROUND), dot, LOG, ROUND)
        tl.store(o_ptr + (o_body + n), r.to(o_ptr.dtype.element_ty), mask=mask)
    r = bwd_tile(eg, ey, e_acc, dot, LOG, ROUND)
    tl.store(o_ptr + (o_row + pos), r.to(o_ptr.dtype.element_ty), mask=edge)


_forward_long = Launcher(_softmax_long_kernel)
_backward_long = Launcher(_softmax_bwd_long_kernel)


# ----------------------------------------------------------------------------- launching


def long_args(M: int, N: int, mode: int, flat: list[int], md1: int,
              tensors: list[torch.Tensor], log: bool, bwd: bool, compute: Any, tile: int,
              warps: int, round_product: bool,
              ) -> tuple[Launcher, tuple[int], tuple[int, ...], dict[str, Any]]:  # fmt: skip
    """The long-row kernels' launch: one program a row. Its body is 16-byte aligned in
    every tensor alike when every row offset agrees modulo one vector (the same strides,
    the usual case); else ``ALIGN`` 1 (element loads). ``round_product``: the backward
    rounds ``grad * output`` to the dtype first (``softmax._rounds_product``)."""
    align = max(1, 16 // min(t.element_size() for t in tensors))
    if any(
        (a - b) % align for t in range(2, len(flat), 2) for a, b in zip(flat[:2], flat[t : t + 2])
    ):
        align = 1
    idx = index_type(M * N, list(tensors[-1].shape), [t.stride() for t in tensors])
    consts = dict(
        LOG=log, COMPUTE=compute, MODE_M=mode, ALIGN=align, IDX=idx,
        ROWS=max(1, tile // LONG_COLS), COLS=LONG_COLS, num_warps=warps,
    )  # fmt: skip
    if bwd:
        consts["ROUND"] = round_product
    return (_backward_long if bwd else _forward_long), (M,), (N, md1, *flat), consts
