"""What launching the pointer kernel (:mod:`~opbench.kernels._lib.matmul_kernels`) takes,
shared by its two callers, :mod:`~opbench.kernels._lib.matmul` (``matmul_into``'s launch
plans) and :mod:`~opbench.kernels._lib.matmul_batch_sum` (its ``BATCH_K`` mode): the one
launcher of the kernel (:data:`mm_launcher`), each operand's layout and the power-of-two
multiple its sizes and strides arrive divided by (:func:`layout_of`,
:func:`operand_layouts`), and the interpreter's tile (:data:`INTERP_CONFIG`).

Why a module: the batch-summing product imported these as private names of ``matmul``.
A leaf beside ``matmul_kernels``: it imports neither caller, so both import it and not
each other.
"""

from __future__ import annotations

import math

import torch

from opbench.kernels._lib.launch import Launcher
from opbench.kernels._lib.matmul_kernels import _mm_kernel

__all__ = ["ANY", "COL", "INTERP_CONFIG", "ROW", "layout_of", "mm_launcher", "operand_layouts",
           "pow2_multiple"]  # fmt: skip

#: Layout of an operand's two matrix dims, a compile-time choice: rows contiguous (the
#: inner dim has stride 1), columns contiguous (the outer one has), or general strides.
ANY, ROW, COL = 0, 1, 2

#: The pointer kernel's launcher, one for both callers (a :class:`Launcher` keeps its own
#: cache of compiled kernels: one instance per kernel).
mm_launcher = Launcher(_mm_kernel)

#: The interpreter multiplies with numpy: one tile size keeps tests fast, and masks get
#: exercised by any shape that is not a multiple of 32.
INTERP_CONFIG: tuple[int, ...] = (32, 32, 32, 4, 4, 1)


def pow2_multiple(n: int, vec: int) -> int:
    """The largest power of two up to ``vec`` that divides ``n`` (``vec`` for 0)."""
    m = vec
    while n % m:
        m //= 2
    return m


def layout_of(t: torch.Tensor, vec: int) -> tuple[int, int, tuple[int, int, int]]:
    """(layout, multiple, strides) of a 3-D operand ``[batch, rows, cols]`` for the kernel:
    ROW where the cols are contiguous, COL where the rows are, else ANY; ``multiple`` is
    the largest power of two up to ``vec`` (16 bytes) that every other stride is a
    multiple of, where the address is 16-byte aligned, else 1; the strides are passed
    divided by it. Not ``vec`` or nothing: a 14x14 feature map's 196 positions are a
    multiple of 4 f16 elements, and with that known the sm_90 code reads such rows 8 bytes
    a ``cp.async`` and stores them 8 bytes a ``st.global.v2`` (2-byte loads through
    registers and 2-byte stores when it was taken as 1). A dim of size 1 has no stride
    that matters: taken as 0."""
    sb, sr, sc = (0 if n == 1 else st for n, st in zip(t.shape, t.stride(), strict=True))
    if sc == 1:
        layout, rest = ROW, (sb, sr)
    elif sr == 1:
        layout, rest = COL, (sb, sc)
    else:
        return ANY, 1, (sb, sr, sc)
    mult = pow2_multiple(math.gcd(*rest), vec) if t.data_ptr() % 16 == 0 else 1
    return layout, mult, (sb // mult, sr // mult if layout == ROW else sr,
                          sc // mult if layout == COL else sc)  # fmt: skip


def operand_layouts(a: torch.Tensor, b: torch.Tensor, vec: int) -> tuple:
    """``(A_LAYOUT, DA, a strides, B_LAYOUT, DB, b strides)`` of the kernel's operands,
    ``a`` ``[batch, M, K]`` and ``b`` ``[batch, K, N]``."""
    la, da, sa = layout_of(a, vec)
    lb, db, sb = layout_of(b.transpose(1, 2), vec)  # as [batch, N, K]: ROW is K-contiguous
    lb = {ROW: COL, COL: ROW}.get(lb, ANY)  # back to [batch, K, N] terms
    return la, da, sa, lb, db, (sb[0], sb[2], sb[1])
