"""The Triton device code of :mod:`opbench.kernels._lib.pointwise`: the flat and the
strided elementwise kernels, the operand loads and index arithmetic they share, and the
identity op that copies run through. :mod:`~opbench.kernels._lib.pointwise` owns the
rest (which kernel a call takes, its tiles and index type, the plans cached per layout,
the ATen-facing helpers) and every tunable constant: ``--set pointwise.NAME=VALUE``
(``benchmarks/common/kernel_overrides.py``) sets them there, and they reach these
kernels only as constexpr arguments of a launch, never as globals read here (Triton
would capture a global's value at the first compile).

Separate so the launch planning can be read apart from the device code, as the
convolutions are (``conv`` and ``conv_kernels``). :func:`unravel` is public: cat's
per-input copy (``copy._cat_part``) calls it too.

Operand modes (the ``A``/``B``/``C`` constexprs): 0 absent, 1 a tensor of the output's
shape, 2 one element read once, 3 a number passed by value (``pointwise.ABSENT``,
``TENSOR``, ``ELEMENT``, ``NUMBER``).
"""

from __future__ import annotations

import triton
import triton.language as tl

__all__ = ["_flat_kernel", "_identity", "_strided_kernel", "unravel"]


@triton.jit
def _identity(a, b, c, p0, p1):
    return a


@triton.jit
def _operand(
    ptr, offs, mask, number, MODE: tl.constexpr, COMPUTE: tl.constexpr, BLOCK: tl.constexpr,
    MASKED: tl.constexpr,
):  # fmt: skip
    """One operand as a ``[BLOCK]`` tensor of ``COMPUTE``. Lanes masked off read 1, a
    value every op's fast path takes: 0 sent ``sqrt``'s and division's dead lanes down
    their slow paths (a call in the sm_90 code) beside the live lanes of their warp."""
    if MODE == 1:
        if MASKED:
            v = tl.load(ptr + offs, mask=mask, other=1).to(COMPUTE)
        else:
            v = tl.load(ptr + offs).to(COMPUTE)
    elif MODE == 2:
        v = tl.broadcast_to(tl.load(ptr).to(COMPUTE), [BLOCK])  # one element, read once
    else:
        # broadcast, not 0 + number: that turns a -0.0 into +0.0
        v = tl.broadcast_to(tl.cast(number, COMPUTE), [BLOCK])
    return v


@triton.jit
def _flat_tile(
    a_ptr, b_ptr, c_ptr, out_ptr, offs, mask, na, nb, nc, p0, p1,
    FN: tl.constexpr, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr,
    COMPUTE: tl.constexpr, BLOCK: tl.constexpr, MASKED: tl.constexpr,
):  # fmt: skip
    a = _operand(a_ptr, offs, mask, na, A, COMPUTE, BLOCK, MASKED)
    b = a
    c = a
    if B != 0:
        b = _operand(b_ptr, offs, mask, nb, B, COMPUTE, BLOCK, MASKED)
    if C != 0:
        c = _operand(c_ptr, offs, mask, nc, C, COMPUTE, BLOCK, MASKED)
    y = FN(a, b, c, tl.cast(p0, COMPUTE), tl.cast(p1, COMPUTE)).to(out_ptr.dtype.element_ty)
    if MASKED:
        tl.store(out_ptr + offs, y, mask=mask)
    else:
        tl.store(out_ptr + offs, y)


@triton.jit
def _flat_kernel(
    a_ptr, b_ptr, c_ptr, out_ptr,
    n: tl.int64,
    na: tl.float64, nb: tl.float64, nc: tl.float64, p0: tl.float64, p1: tl.float64,
    FN: tl.constexpr, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr,
    COMPUTE: tl.constexpr, BLOCK: tl.constexpr, IDX: tl.constexpr,
):  # fmt: skip
    """``IDX``: the index type, int32 whenever every offset fits (see
    :func:`pointwise.index_type`).

    A program that lies wholly inside ``n`` (all of them when the programs cover ``n``
    exactly, as :func:`pointwise.tile_plan`'s do for powers of two) runs without a mask;
    only a partial last program is masked. Triton proves a mask constant over a vector only
    from ``n``'s divisibility by 16: with every program masked, an f16 stream of a count
    not divisible by 16 was loaded and stored element by element (8 ``LDG.E.U16`` a
    thread for a 1,438,452-element f16 clamp, against one ``LDG.E.128`` unmasked; 7.62
    µs against eager's 6.70 on the H100). The test is one uniform branch a program."""
    start = tl.program_id(0).to(IDX) * BLOCK
    offs = start + tl.arange(0, BLOCK)
    if start + BLOCK <= n.to(IDX):
        _flat_tile(a_ptr, b_ptr, c_ptr, out_ptr, offs, offs, na, nb, nc, p0, p1,
                   FN, A, B, C, COMPUTE, BLOCK, False)  # fmt: skip
    else:
        _flat_tile(a_ptr, b_ptr, c_ptr, out_ptr, offs, offs < n.to(IDX), na, nb, nc, p0, p1,
                   FN, A, B, C, COMPUTE, BLOCK, True)  # fmt: skip


@triton.jit
def unravel(idx, d1, d2, d3, IDX: tl.constexpr, NDIM: tl.constexpr):
    """``(i0, i1, i2, i3)``: where flat index ``idx`` lies in the merged shape
    ``(d0, d1, d2, d3)``, innermost last, in ``IDX`` arithmetic. Only the last ``NDIM``
    (1-4, a constexpr) dims are computed; the leading indices stay the constant 0, so
    their offsets fold away. One division per dim past the first, each remainder taken
    from its quotient (``idx - r * d3``) rather than by a second division. Shared by the
    strided kernel here and cat's (:func:`copy._cat_part`), which ran ``idx % d3``."""
    i0 = 0
    i1 = 0
    i2 = 0
    if NDIM == 1:
        i3 = idx
    else:
        r = idx // d3.to(IDX)
        i3 = idx - r * d3.to(IDX)
        if NDIM == 2:
            i2 = r
        else:
            r2 = r // d2.to(IDX)
            i2 = r - r2 * d2.to(IDX)
            if NDIM == 3:
                i1 = r2
            else:
                i0 = r2 // d1.to(IDX)
                i1 = r2 - i0 * d1.to(IDX)
    return i0, i1, i2, i3


@triton.jit
def _offset(i0, i1, i2, i3, s0, s1, s2, s3, IDX: tl.constexpr):
    return i0 * s0.to(IDX) + i1 * s1.to(IDX) + i2 * s2.to(IDX) + i3 * s3.to(IDX)


@triton.jit(
    do_not_specialize=[
        "n",
        "d1",
        "d2",
        "d3",
        "as0",
        "as1",
        "as2",
        "as3",
        "bs0",
        "bs1",
        "bs2",
        "bs3",
        "cs0",
        "cs1",
        "cs2",
        "cs3",
        "os0",
        "os1",
        "os2",
        "os3",
    ]
)
def _strided_kernel(
    a_ptr, b_ptr, c_ptr, out_ptr,
    n: tl.int64, d1: tl.int64, d2: tl.int64, d3: tl.int64,
    as0: tl.int64, as1: tl.int64, as2: tl.int64, as3: tl.int64,
    bs0: tl.int64, bs1: tl.int64, bs2: tl.int64, bs3: tl.int64,
    cs0: tl.int64, cs1: tl.int64, cs2: tl.int64, cs3: tl.int64,
    os0: tl.int64, os1: tl.int64, os2: tl.int64, os3: tl.int64,
    na: tl.float64, nb: tl.float64, nc: tl.float64, p0: tl.float64, p1: tl.float64,
    FN: tl.constexpr, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr,
    COMPUTE: tl.constexpr, BLOCK: tl.constexpr, IDX: tl.constexpr, NDIM: tl.constexpr,
):  # fmt: skip
    """``IDX`` as in the flat kernel: 64-bit division is emulated on the GPU, so the
    index arithmetic below costs several times more in int64. ``NDIM``: the merged rank
    (1-4; the shape is padded with leading 1s): one division per dim past the first,
    none for one strided dim (each costs some 20 instructions an element, which made a
    broadcast f16 ``div`` over [32768, 196] compute-bound)."""
    idx = tl.program_id(0).to(IDX) * BLOCK + tl.arange(0, BLOCK)
    mask = idx < n.to(IDX)
    # the output index in the merged shape (d0, d1, d2, d3), innermost last
    i0, i1, i2, i3 = unravel(idx, d1, d2, d3, IDX, NDIM)
    a_offs = _offset(i0, i1, i2, i3, as0, as1, as2, as3, IDX)
    a = _operand(a_ptr, a_offs, mask, na, A, COMPUTE, BLOCK, True)
    b = a
    c = a
    if B != 0:
        b_offs = _offset(i0, i1, i2, i3, bs0, bs1, bs2, bs3, IDX)
        b = _operand(b_ptr, b_offs, mask, nb, B, COMPUTE, BLOCK, True)
    if C != 0:
        c_offs = _offset(i0, i1, i2, i3, cs0, cs1, cs2, cs3, IDX)
        c = _operand(c_ptr, c_offs, mask, nc, C, COMPUTE, BLOCK, True)
    y = FN(a, b, c, tl.cast(p0, COMPUTE), tl.cast(p1, COMPUTE))
    out_offs = _offset(i0, i1, i2, i3, os0, os1, os2, os3, IDX)
    tl.store(out_ptr + out_offs, y.to(out_ptr.dtype.element_ty), mask=mask)
