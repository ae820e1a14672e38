"""What the host proves about a kernel's integers, said in a form Triton reads.

Our launches leave integers unspecialized (``launch.jit_unspecialized``: one compiled
kernel serves every shape), so a count or stride reaches a kernel with no divisibility
Triton can see. A bounds mask against it (``c < C``) or an offset built from it is then
not provably constant or aligned over a vector, and the access compiles to 2-byte
``ld``/``st.global.b16`` with no ``cp.async`` (sm_90 PTX, ``kernel_ptx.py``; the transpose
before the channels-last GEMMs copied at 1.1 TB/s of the H200's 4.8 that way). Triton
ignores ``tl.multiple_of`` of a scalar; ``(v // A) * A`` for a constexpr power of two
``A`` is a shift and a mask it does read. The host must have checked that ``A`` divides
``v``: where it does not, the result is silently wrong, which the kernels' tests against
eager catch for the shapes they draw.
"""

from __future__ import annotations

import triton
import triton.language as tl

__all__ = ["common_power_of_two", "multiple", "multiples", "row_alignment"]


def common_power_of_two(*values: int) -> int:
    """The largest of 8, 4, 2 and 1 that divides every value: the ``A`` a kernel may
    restate them with (:func:`multiple`), the widest vector (in elements) whose alignment
    rows starting at multiples of ``values`` keep."""
    return next(v for v in (8, 4, 2, 1) if all(x % v == 0 for x in values))


def row_alignment(*values: int, partial: bool) -> int:
    """A channels-last GEMM's row alignment (in elements) for row strides and channel
    counts ``values``: 8 where all are multiples of 8; else, ``partial``, the largest of
    4, 2 and 1 dividing them all (8- and 4-byte copies), or 1 (the rule before partial
    alignments, kept while they are untimed)."""
    align = common_power_of_two(*values)
    return align if align == 8 or partial else 1


@triton.jit
def multiple(v, A: tl.constexpr):
    """``v``, which the host found divisible by ``A``, restated so Triton knows it is."""
    return (v // A) * A


@triton.jit
def multiples(a, b, c, A: tl.constexpr):
    """A tensor's three strides (or any three integers), each restated as :func:`multiple`
    of ``A``; at ``A = 1`` as they were (the compiler folds the division by 1)."""
    return multiple(a, A), multiple(b, A), multiple(c, A)
