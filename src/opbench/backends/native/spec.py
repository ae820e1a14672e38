"""What a kernel declares so that the C++ gate can launch it without entering Python.

A backend's kernel function may carry an ``opbench_native`` attribute: a plain dict of
:class:`NativeSpec`'s fields (a dict, so a kernel directory declares it without importing
opbench). The registry (:mod:`opbench.backends.registry`) then puts the C++ gate
(``gate.cpp``) in front of that operator on CUDA, and the gate launches the kernel itself
for the calls it can read: the first argument a contiguous f16/bf16/f32/f64 CUDA tensor
(or an integer one, where the spec says ``integers``) of at most ``max_numel`` elements,
16-byte aligned; for a two-operand op the second a
contiguous tensor of the same shape, of the first's dtype or a narrower one of its kind
(an f16 operand beside f32: the result keeps the first's dtype), a 0-dim tensor or a
number; every other
argument a number (``param_args``), one of ``choices`` (``choice_arg``) or None
(``none_args``). Every other
call goes to the kernel's Python function, unchanged.

The launch is the one the Python path makes for the same call: a flat 1-D kernel over the
elements with the arguments ``(a, b, c, out, n, na, nb, nc, p0, p1)`` (pointers, an int64
count, five float64 numbers; ``c`` is ``a``), then whatever scratch pointers Triton
appends, passed as null. ``compile`` returns that kernel for one variant:

    compile(choice, a_dtype, b_mode, b_dtype, block, div16) -> (function, warps, shared, params)

``function`` is the ``CUfunction`` handle loaded in the current device's context,
``params`` the kernel's parameter count (10 plus the scratch pointers), or None when the
variant cannot be launched this way (the gate then sends such calls to Python).
``b_mode`` is 0 (no second operand), 1 (a tensor), 2 (a 0-dim CUDA tensor read once) or 3
(a number, passed in ``nb``). Blocks are powers of two from ``min_block`` to
``max_block``: ``n / spread`` rounded up, as :func:`opbench.kernels._lib.pointwise.tile_plan`
spreads a small input over the SMs.

With ``compile_strided`` the gate also launches calls whose operands the flat kernel
cannot read: a second operand of the same dtype that broadcasts (``[16, 128, 768] /
[16, 128, 1]``, a bias of ``[768]``), and sliced or strided operands (either may also be
the one that broadcasts), where every operand's strides fall from the outermost dim in
and one operand has the result's shape: the calls whose result eager makes contiguous
(a transposed or channels-last operand goes to Python, whose result keeps that layout).
An in-place call takes it where ``self`` cannot overlap itself and ``other`` is ``self``
or lies apart from it. The launch is ``pointwise._strided_kernel``'s: ``(a, b, c, out,
n, d1, d2, d3, a's, b's, c's and out's strides (4 each), na, nb, nc, p0, p1)`` over at
most four merged dims, as :func:`opbench.kernels._lib.pointwise.run` plans it::

    compile_strided(choice, a_dtype, b_mode, b_dtype, block, ndim, idx64) -> the same tuple

``ndim`` is the merged rank (1-4), ``idx64`` whether offsets need 64-bit indexing; the
integers are never specialised on their values (the kernel's ``do_not_specialize``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

__all__ = ["ATTRIBUTE", "OTHER_KINDS", "NativeSpec"]

#: the attribute of a kernel function that holds its :class:`NativeSpec`
ATTRIBUTE = "opbench_native"
#: :attr:`NativeSpec.other`'s values, in the order of their codes in ``gate_native.h``
OTHER_KINDS = ("operand", "mask", "source")

CompileFn = Callable[
    [int, torch.dtype, int, torch.dtype, int, bool], "tuple[int, int, int, int] | None"
]
CompileStridedFn = Callable[
    [int, torch.dtype, int, torch.dtype, int, int, bool], "tuple[int, int, int, int] | None"
]


@dataclass(frozen=True)
class NativeSpec:
    """One operator's native launch (see the module docstring)."""

    #: the overloads this launch is right for (``add.Tensor``, ``add.Scalar``): one Python
    #: function often serves several, and the argument positions below are theirs
    overloads: tuple[str, ...]
    operands: int
    compile: CompileFn
    #: the strided kernel, for the calls the flat one cannot read (module docstring);
    #: None sends them to Python
    compile_strided: CompileStridedFn | None = None
    inplace: bool = False
    #: argument positions (in the schema, keyword-only ones included) passed as p0 / p1
    param_args: tuple[int, int] = (-1, -1)
    param_defaults: tuple[float, float] = (0.0, 0.0)
    #: a string argument's position whose value picks the kernel, and its values
    choice_arg: int = -1
    choices: tuple[str, ...] = ()
    #: or a number argument's (``choice_arg``) exact values that pick kernels 0..k-1; any
    #: other value (NaN included) picks kernel k (pow's exponent: 0.5 is ``sqrt``, 3 a
    #: cube, anything else ``powf``)
    choice_numbers: tuple[float, ...] = ()
    #: argument positions that must be None for a native launch (``clone``'s
    #: ``memory_format``: the gate writes a contiguous output, right only when none is asked)
    none_args: tuple[int, ...] = ()
    #: a bool argument's position (``self_is_result``): when True, a negative p0 goes to
    #: Python, which raises eager's error (``leaky_relu_backward`` of an in-place
    #: ``leaky_relu_`` with a negative slope cannot tell the input's sign from the result's)
    is_result_arg: int = -1
    #: what the second operand may be: ``"operand"`` (a tensor of self's dtype or a
    #: narrower one of its kind, a 0-dim tensor or a number), ``"mask"`` (a bool tensor
    #: that broadcasts to self: ``masked_fill``'s) or ``"source"`` (a tensor on self's
    #: device of self's dtype or a narrower one of its kind, 0-dim included, never a
    #: number: ``copy_``'s, whose kernel returns it); anything else goes to Python
    other: str = "operand"
    #: p0 is a fill value: a finite one past self's dtype's range goes to Python, which
    #: raises eager's overflow error
    fill_value: bool = False
    #: p0 and p1 must be given: a None there goes to Python (``clamp``'s bounds: one
    #: bound alone is another kernel, ``clamp_min``'s, and a NaN default is no default)
    params_required: bool = False
    #: integer tensors (int64, int32, int16, int8, uint8) too, for an op that keeps an
    #: integer self's dtype when every number is an integer (``clamp``; not ``div``,
    #: whose result is floating): the gate then takes only integer numbers that a
    #: float64 holds exactly, and leaves a float number (which promotes) to Python
    integers: bool = False
    max_numel: int = 2**31 - 1 - 16384
    spread: int = 132
    min_block: int = 128
    max_block: int = 1024

    def __post_init__(self) -> None:
        if self.operands not in (1, 2):
            raise ValueError(f"a native path takes 1 or 2 operands, not {self.operands}")
        if self.choices and self.choice_numbers:
            raise ValueError("a kernel is picked by choices or by choice_numbers, not both")
        if (self.choice_arg >= 0) != bool(self.choices or self.choice_numbers):
            raise ValueError("choice_arg goes with choices or choice_numbers")
        if not callable(self.compile):
            raise TypeError("compile must be callable")
        if self.other not in OTHER_KINDS:
            raise ValueError(f"other is one of {', '.join(OTHER_KINDS)}, not {self.other!r}")
        if self.other != "operand" and self.operands != 2:
            raise ValueError(f"a {self.other} is the second operand: operands must be 2")
        if self.compile_strided is not None and not callable(self.compile_strided):
            raise TypeError("compile_strided must be callable or None")

    @classmethod
    def of(cls, kernel: object, op: str) -> NativeSpec | None:
        """The spec ``kernel`` declares for ``op``, or None (no declaration, or one for
        other overloads). A malformed declaration raises, naming the kernel."""
        value = getattr(kernel, ATTRIBUTE, None)
        if value is None:
            return None
        try:
            spec = value if isinstance(value, cls) else cls(**dict(value))
        except (TypeError, ValueError) as e:
            name = getattr(kernel, "__qualname__", repr(kernel))
            raise ValueError(f"{name}.{ATTRIBUTE} is not a valid native spec: {e}") from e
        return spec if op in spec.overloads else None
