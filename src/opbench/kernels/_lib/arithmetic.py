"""Arithmetic on the elementwise engine (:mod:`opbench.kernels._lib.pointwise`): add,
sub, rsub, mul, div (true division and the ``trunc``/``floor`` rounding modes), neg and
where, with their in-place and ``out=`` entry points. Each op is a scalar ``@triton.jit``
function handed to the engine's kernels; the entry points follow ATen's schemas and its
type promotion and errors.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from opbench.kernels._lib.device_math import ON_GPU, libdevice
from opbench.kernels._lib.native_launch import declare_flat, declare_replay
from opbench.kernels._lib.pointwise import elementwise, unary
from opbench.kernels._lib.pointwise_rules import check_number, dtype_name, result_type


@triton.jit
def _add(a, b, c, p0, p1):
    return a + b * p0


@triton.jit
def _sub(a, b, c, p0, p1):
    return a - b * p0


@triton.jit
def _rsub(a, b, c, p0, p1):
    return b - a * p0


@triton.jit
def _mul(a, b, c, p0, p1):
    return a * b


@triton.jit
def _divide(a, b, c, p0, p1):
    return a / b


@triton.jit
def trunc_f(x):
    return tl.where(x < 0, tl.math.ceil(x), tl.math.floor(x))


@triton.jit
def fmod_f(a, b):
    """C's fmod: libdevice on the GPU; a - trunc(a / b) * b on the interpreter (exact
    while a / b is, which covers the test inputs)."""
    if ON_GPU:
        r = libdevice.fmod(a, b)
    else:
        r = a - trunc_f(a / b) * b
    return r


@triton.jit
def _divide_trunc(a, b, c, p0, p1):
    return trunc_f(a / b)


@triton.jit
def _divide_floor(a, b, c, p0, p1):
    # ATen's div_floor_floating, step by step (a true floor(a / b) rounds differently)
    mod = fmod_f(a, b)
    q = (a - mod) / b
    q = tl.where((mod != 0) & ((b < 0) != (mod < 0)), q - 1.0, q)
    fl = tl.math.floor(q)
    fl = tl.where(q - fl > 0.5, fl + 1.0, fl)
    zero = tl.where(a / b < 0, -0.0, 0.0)
    res = tl.where(q != 0, fl, zero)
    return tl.where(b == 0, a / b, res)


@triton.jit
def _neg(a, b, c, p0, p1):
    return -a


@triton.jit
def _where(a, b, c, p0, p1):
    return tl.where(a != 0, b, c)


def _arith(
    fn: Any, self: Any, other: Any, alpha: Any, out: Any, inplace: Any, op: str
) -> torch.Tensor:
    if isinstance(other, complex) or isinstance(alpha, complex):
        check_number(other)
        check_number(alpha)
    dtype = result_type(self, other)
    if dtype is torch.bool and op in ("sub", "rsub"):
        raise RuntimeError(
            "Subtraction, the `-` operator, with two bool tensors is not supported. "
            "Use the `^` or `logical_xor()` operator instead."
        )
    if isinstance(alpha, float) and not dtype.is_floating_point and alpha != int(alpha):
        raise RuntimeError(
            "For integral input tensors, argument alpha must not be a floating point number."
        )
    return elementwise(fn, [self, other], dtype, p0=alpha, out=out, inplace=inplace)


# Like sub/_/_out below, kept apart: one def per ATen schema, each a one-line call
def add(self: Any, other: Any, alpha: Any = 1) -> torch.Tensor:
    return _arith(_add, self, other, alpha, None, None, "add")


def add_(self: torch.Tensor, other: Any, alpha: Any = 1) -> torch.Tensor:
    return _arith(_add, self, other, alpha, None, self, "add")


def add_out(self: Any, other: Any, alpha: Any = 1, *, out: torch.Tensor) -> torch.Tensor:
    return _arith(_add, self, other, alpha, out, None, "add")


def sub(self: Any, other: Any, alpha: Any = 1) -> torch.Tensor:
    return _arith(_sub, self, other, alpha, None, None, "sub")


def sub_(self: torch.Tensor, other: Any, alpha: Any = 1) -> torch.Tensor:
    return _arith(_sub, self, other, alpha, None, self, "sub")


def sub_out(self: Any, other: Any, alpha: Any = 1, *, out: torch.Tensor) -> torch.Tensor:
    return _arith(_sub, self, other, alpha, out, None, "sub")


def rsub(self: Any, other: Any, alpha: Any = 1) -> torch.Tensor:
    return _arith(_rsub, self, other, alpha, None, None, "rsub")


def mul(self: Any, other: Any) -> torch.Tensor:
    return _arith(_mul, self, other, 1, None, None, "mul")


def mul_(self: torch.Tensor, other: Any) -> torch.Tensor:
    return _arith(_mul, self, other, 1, None, self, "mul")


def mul_out(self: Any, other: Any, *, out: torch.Tensor) -> torch.Tensor:
    return _arith(_mul, self, other, 1, out, None, "mul")


def _div(self: Any, other: Any, rounding_mode: str | None, out: Any, inplace: Any) -> torch.Tensor:
    check_number(other)
    dtype = result_type(self, other)
    if rounding_mode is None:
        if not dtype.is_floating_point:
            dtype = torch.get_default_dtype()  # true division of integers
        return elementwise(_divide, [self, other], dtype, out=out, inplace=inplace)
    if rounding_mode not in ("trunc", "floor"):
        raise ValueError(
            "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
            f"'{rounding_mode}'"
        )
    if not dtype.is_floating_point:
        # integer division semantics (and division by zero) differ between Triton's
        # compiled code and its interpreter; declined rather than guessed
        raise NotImplementedError(f"div with rounding_mode={rounding_mode!r} on {dtype}")
    fn = _divide_trunc if rounding_mode == "trunc" else _divide_floor
    return elementwise(fn, [self, other], dtype, out=out, inplace=inplace)


def div(self: Any, other: Any, *, rounding_mode: str | None = None) -> torch.Tensor:
    return _div(self, other, rounding_mode, None, None)


def div_(self: torch.Tensor, other: Any, *, rounding_mode: str | None = None) -> torch.Tensor:
    return _div(self, other, rounding_mode, None, self)


def div_out(
    self: Any, other: Any, *, rounding_mode: str | None = None, out: torch.Tensor
) -> torch.Tensor:
    return _div(self, other, rounding_mode, out, None)


def neg(self: torch.Tensor) -> torch.Tensor:
    return unary(_neg, self, None, None, floats_only=False)


def neg_(self: torch.Tensor) -> torch.Tensor:
    return unary(_neg, self, None, self, floats_only=False)


def neg_out(self: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
    return unary(_neg, self, out, None, floats_only=False)


def where(condition: torch.Tensor, self: Any, other: Any) -> torch.Tensor:
    return _where_into(condition, self, other, None)


def where_out(condition: torch.Tensor, self: Any, other: Any, *, out: torch.Tensor) -> torch.Tensor:
    return _where_into(condition, self, other, out)


def _where_into(condition: torch.Tensor, self: Any, other: Any, out: Any) -> torch.Tensor:
    if condition.dtype not in _CONDITION_DTYPES:
        raise RuntimeError(
            "where expected condition to be a boolean tensor, but got a tensor with dtype "
            f"{dtype_name(condition.dtype)}"
        )
    check_number(self)
    check_number(other)
    dtype = result_type(self, other)
    return elementwise(_where, [condition, self, other], dtype, out=out)


_CONDITION_DTYPES = frozenset((torch.bool, torch.uint8))


# The C++ gate launches these without entering Python (native_launch). self + alpha *
# other: p0 is alpha (schema position 2), 1 when absent; mul passes p0=1 (unused); true
# division only: div.Tensor_mode's rounding modes take the Python path. Integer tensors
# too, except for division (a floating result): with integer numbers (a float one
# promotes, or is refused as an integer alpha) they keep self's dtype, as _arith decides.
for _fn, _inplace, _names, _kernel in (
    (add, False, ("add.Tensor", "add.Scalar"), _add),
    (add_, True, ("add_.Tensor", "add_.Scalar"), _add),
    (sub, False, ("sub.Tensor", "sub.Scalar"), _sub),
    (sub_, True, ("sub_.Tensor", "sub_.Scalar"), _sub),
):
    declare_flat(_fn, _names, (_kernel,), 2, inplace=_inplace, param_args=(2, -1),
                 param_defaults=(1.0, 0.0), integers=True)  # fmt: skip
declare_flat(mul, ("mul.Tensor", "mul.Scalar"), (_mul,), 2, param_defaults=(1.0, 0.0),
             integers=True)  # fmt: skip
declare_flat(mul_, ("mul_.Tensor", "mul_.Scalar"), (_mul,), 2, inplace=True,
             param_defaults=(1.0, 0.0), integers=True)  # fmt: skip
declare_flat(div, ("div.Tensor", "div.Scalar"), (_divide,), 2)
declare_flat(div_, ("div_.Tensor", "div_.Scalar"), (_divide,), 2, inplace=True)
declare_flat(neg, ("neg.default",), (_neg,), 1, integers=True)
declare_flat(rsub, ("rsub.Tensor", "rsub.Scalar"), (_rsub,), 2, param_args=(2, -1),
             param_defaults=(1.0, 0.0), integers=True)  # fmt: skip

# the gate repeats these functions' launches (native_launch.declare_replay)
declare_replay(
    add,
    add_,
    add_out,
    div,
    div_,
    div_out,
    mul,
    mul_,
    mul_out,
    neg,
    neg_,
    neg_out,
    rsub,
    sub,
    sub_,
    sub_out,
    where,
    where_out,
)
