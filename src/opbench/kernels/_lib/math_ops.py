"""Unary math (exp, sqrt, rsqrt, reciprocal), ``pow.Tensor_Scalar``, ``clamp``,
``masked_fill`` with a scalar, ``minimum`` and ``maximum``, with their in-place and
``out=`` overloads, on the elementwise kernels of :mod:`opbench.kernels._lib.pointwise`.
Special cases (pow's exponents 0, 1, 0.5, -1, 2, ...; clamp with min > max; fill values
that overflow the dtype) follow eager's, checked against it on the CPU.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from opbench.kernels._lib.device_math import ON_GPU, exp_f, libdevice, log_f
from opbench.kernels._lib.native_launch import declare_flat, declare_replay
from opbench.kernels._lib.pointwise import IDENTITY, elementwise
from opbench.kernels._lib.pointwise_rules import check_number, result_type


@triton.jit
def _exp(a, b, c, p0, p1):
    return exp_f(a)


@triton.jit
def _sqrt(a, b, c, p0, p1):
    return tl.sqrt_rn(a)


@triton.jit
def _rsqrt(a, b, c, p0, p1):
    """CUDA eager's ``::rsqrt`` on the GPU in float32 (``rsqrtf``: PTX ``rsqrt.approx.f32``,
    2 ulp, a float32 denormal kept), eager's CPU kernel's ``1 / sqrt(x)`` elsewhere and in
    float64. One approximate instruction against a correctly rounded square root and a
    division: a 21,504-element f16 call's kernel took 0.96 µs against 1.03 on an H200
    (``benchmarks/probes/small_elementwise.py``, 2026-11-30). Not libdevice's ``rsqrt``:
    Triton links libdevice flushing denormals, so a float32 or bfloat16 denormal would give
    inf where eager gives a finite result."""
    if ON_GPU:
        if a.dtype == tl.float32:
            y = tl.inline_asm_elementwise(
                "rsqrt.approx.f32 $0, $1;", "=r,r", [a], dtype=tl.float32, is_pure=True, pack=1
            )
        else:
            y = 1.0 / tl.sqrt_rn(a)
    else:
        y = 1.0 / tl.sqrt_rn(a)
    return y


@triton.jit
def _reciprocal(a, b, c, p0, p1):
    return 1.0 / a


@triton.jit
def _ones(a, b, c, p0, p1):
    return tl.full(a.shape, 1, a.dtype)  # x ** 0 == 1 for every x, NaN included


@triton.jit
def _square(a, b, c, p0, p1):
    return a * a


@triton.jit
def _cube(a, b, c, p0, p1):
    return a * a * a


@triton.jit
def _inv_square(a, b, c, p0, p1):
    return 1.0 / (a * a)


@triton.jit
def _pow_float(a, b, c, p0, p1):
    """std::pow(a, p0) for a float p0 that is none of the special cases; p1 says what
    p0 is: 0 not an integer (a finite negative base gives NaN), 1 an even integer or
    +-inf, 2 an odd integer (a negative base, -0 and -inf included, flips the sign)."""
    mag = exp_f(p0 * log_f(tl.abs(a)))
    negative = (a < 0) | ((a == 0) & (1.0 / a < 0))
    y = tl.where(negative, tl.where(p1 == 2, -mag, mag), mag)
    y = tl.where((a < 0) & (a != float("-inf")), tl.where(p1 == 0, float("nan"), y), y)
    # |a| == 1 with an infinite exponent, and 1 ** NaN, are 1
    y = tl.where(tl.abs(a) == 1, tl.where(tl.abs(p0) == float("inf"), 1.0, y), y)
    return tl.where(a == 1, 1.0, y)


@triton.jit
def _pow_cuda(a, b, c, p0, p1):
    """CUDA eager's ``::pow(base, exp)`` in the compute type (powf for float32, float16
    and bfloat16, whose exponent arrives rounded to the dtype, as ATen's
    ``exp_scalar.to<scalar_t>()``): libdevice's pow, the same CUDA math library; the
    std::pow form above where no libdevice exists (the interpreter)."""
    if ON_GPU:
        y = libdevice.pow(a, p0.to(a.dtype))
    else:
        y = _pow_float(a, b, c, p0, p1)
    return y


@triton.jit
def _pow_cuda_f16(a, b, c, p0, p1):
    """:func:`_pow_cuda` for float16, the exponent rounded to float16 here (float64 ->
    float32 -> float16, as ``Scalar::to<at::Half>`` rounds it): the C++ gate passes the
    exponent as it is, so the rounding is the kernel's, the same on both paths."""
    return _pow_cuda(a, b, c, p0.to(tl.float32).to(tl.float16).to(a.dtype), p1)


@triton.jit
def _pow_cuda_bf16(a, b, c, p0, p1):
    return _pow_cuda(a, b, c, p0.to(tl.float32).to(tl.bfloat16).to(a.dtype), p1)


@triton.jit
def _cube_f16(a, b, c, p0, p1):
    # at::Half's operator* rounds each product: base * base * base
    return (a * a).to(tl.float16).to(a.dtype) * a


@triton.jit
def _cube_bf16(a, b, c, p0, p1):
    return (a * a).to(tl.bfloat16).to(a.dtype) * a


@triton.jit
def _inv_square_f16(a, b, c, p0, p1):
    # 1.0 / (base * base): the product rounded to the dtype, then a float division
    return 1.0 / (a * a).to(tl.float16).to(a.dtype)


@triton.jit
def _inv_square_bf16(a, b, c, p0, p1):
    return 1.0 / (a * a).to(tl.bfloat16).to(a.dtype)


@triton.jit
def _pow_int(a, b, c, p0, p1):
    """Integer a ** p0 for an integer p0 >= 0 by squaring (wraps as eager's powi)."""
    r = tl.full(a.shape, 1, a.dtype)
    base = a
    e = p0
    while e > 0:
        if e % 2 == 1:
            r = r * base
        base = base * base
        e = e // 2
    return r


@triton.jit
def _clamp(a, b, c, p0, p1):
    # self, min, max: min first, then max (max wins when min > max); NaN bounds give NaN
    y = tl.where((a < b) | (b != b), b, a)
    return tl.where((y > c) | (c != c), c, y)


@triton.jit
def _clamp_bounds(a, b, c, p0, p1):
    # _clamp with the bounds as p0 / p1 (the C++ gate's launch): both cast to the compute
    # type as the Python path casts its number operands, so the two compute the same bits
    y = tl.where((a < p0) | (p0 != p0), p0, a)
    return tl.where((y > p1) | (p1 != p1), p1, y)


@triton.jit
def _clamp_min(a, b, c, p0, p1):
    return tl.where((a < b) | (b != b), b, a)


@triton.jit
def _clamp_max(a, b, c, p0, p1):
    return tl.where((a > b) | (b != b), b, a)


@triton.jit
def _clamp_min_cuda(a, b, c, p0, p1):
    # CUDA eager's clamp_min: isnan(v) ? v : ::max(v, lower), and fmaxf ignores a NaN bound
    return tl.where(a < b, b, a)


@triton.jit
def _clamp_max_cuda(a, b, c, p0, p1):
    return tl.where(a > b, b, a)


@triton.jit
def _masked_fill(a, b, c, p0, p1):
    # self, mask; p0 = value
    return tl.where(b != 0, p0, a)


@triton.jit
def _minimum(a, b, c, p0, p1):
    y = tl.where(b < a, b, a)
    return tl.where(a != a, a, tl.where(b != b, b, y))


@triton.jit
def _maximum(a, b, c, p0, p1):
    y = tl.where(b > a, b, a)
    return tl.where(a != a, a, tl.where(b != b, b, y))


# unary math: integer and bool inputs give the default float dtype, as eager's


def _math_dtype(self: torch.Tensor) -> torch.dtype:
    if self.dtype.is_complex:
        raise NotImplementedError(f"no Triton kernel for {self.dtype}")
    return self.dtype if self.dtype.is_floating_point else torch.get_default_dtype()


def _math(fn: Any, self: torch.Tensor, out: Any, inplace: Any) -> torch.Tensor:
    return elementwise(fn, [self], _math_dtype(self), out=out, inplace=inplace)


# Like activations.sigmoid/_/_out, kept apart: one def per ATen schema (exp, exp_,
# exp_out...), each a one-line call of _math
def exp(self: torch.Tensor) -> torch.Tensor:
    return _math(_exp, self, None, None)


def exp_(self: torch.Tensor) -> torch.Tensor:
    return _math(_exp, self, None, self)


def exp_out(self: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
    return _math(_exp, self, out, None)


def sqrt(self: torch.Tensor) -> torch.Tensor:
    return _math(_sqrt, self, None, None)


def sqrt_(self: torch.Tensor) -> torch.Tensor:
    return _math(_sqrt, self, None, self)


def sqrt_out(self: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
    return _math(_sqrt, self, out, None)


def rsqrt(self: torch.Tensor) -> torch.Tensor:
    return _math(_rsqrt, self, None, None)


def rsqrt_(self: torch.Tensor) -> torch.Tensor:
    return _math(_rsqrt, self, None, self)


def rsqrt_out(self: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
    return _math(_rsqrt, self, out, None)


def reciprocal(self: torch.Tensor) -> torch.Tensor:
    return _math(_reciprocal, self, None, None)


def reciprocal_(self: torch.Tensor) -> torch.Tensor:
    return _math(_reciprocal, self, None, self)


def reciprocal_out(self: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
    return _math(_reciprocal, self, out, None)


# pow.Tensor_Scalar: eager's special cases (ATen's pow_tensor_scalar_kernel), then
# std::pow through exp/log (in float64 for float32 tensors: eager's CPU pow takes the
# exponent as a double). CUDA eager (PowKernel.cu) special-cases more: 0.5, -0.5 and -1
# for every float dtype, 2, 3 and -2 in the dtype's own arithmetic (at::Half rounds each
# product), and powf with the exponent rounded to the dtype otherwise.

_EXACT_INT = 2**53  # integer exponents, bounds and fill values travel as float64


_ROOTS = {0.5: _sqrt, -0.5: _rsqrt, -1.0: _reciprocal}
_POWERS = {2.0: _square, 3.0: _cube, -2.0: _inv_square}
_ROOTS_DTYPES = frozenset((torch.float32, torch.float64, torch.bfloat16))
_POWERS_DTYPES = frozenset((torch.float32, torch.float64))
_CUDA_POWERS = {
    torch.float16: {2.0: _square, 3.0: _cube_f16, -2.0: _inv_square_f16},
    torch.bfloat16: {2.0: _square, 3.0: _cube_bf16, -2.0: _inv_square_bf16},
}


#: CUDA's powf with the exponent rounded to the dtype (eager's ``exp_scalar.to<scalar_t>()``):
#: in the kernel for 16-bit dtypes; float32's is the kernel's own cast of p0
_CUDA_POW = {torch.float16: _pow_cuda_f16, torch.bfloat16: _pow_cuda_bf16}


def _pow_float_fn(
    dtype: torch.dtype, e: float, cuda: bool = False
) -> tuple[Any, float, float, torch.dtype | None]:
    """The kernel, its p0 and p1, and a compute dtype override, for a float result: as
    eager on the CPU, or (``cuda``) as eager on CUDA."""
    if cuda:
        special = _ROOTS.get(e) or _CUDA_POWERS.get(dtype, _POWERS).get(e)
        if special is not None:
            return special, e, 0.0, None
        return _CUDA_POW.get(dtype, _pow_cuda), e, _pow_kind(e), None
    if dtype in _ROOTS_DTYPES:
        special = _ROOTS.get(e)
        if special is not None:
            return special, e, 0.0, None
    if dtype in _POWERS_DTYPES:
        special = _POWERS.get(e)
        if special is not None:
            return special, e, 0.0, None
    if e == 2.0:
        return _square, e, 0.0, None
    return _pow_float, e, _pow_kind(e), (torch.float64 if dtype == torch.float32 else None)


def _pow_kind(e: float) -> float:
    """``_pow_float``'s p1: 0 not an integer, 1 an even integer or +-inf, 2 odd."""
    if e in (float("inf"), float("-inf")):
        return 1.0
    if e == e and e == int(e):
        return 2.0 if int(e) % 2 else 1.0
    return 0.0


def _pow_into(self: torch.Tensor, exponent: Any, out: Any, inplace: Any) -> torch.Tensor:
    if isinstance(exponent, complex) or self.dtype.is_complex:
        raise NotImplementedError("complex pow has no Triton kernel here")
    dtype = result_type(self, exponent)
    if not dtype.is_floating_point:
        if exponent < 0:
            raise RuntimeError("Integers to negative integer powers are not allowed.")
        if exponent >= _EXACT_INT or (dtype != torch.int64 and exponent > torch.iinfo(dtype).max):
            raise NotImplementedError(f"pow of {dtype} to {exponent}: exponent out of range")
    e = float(exponent)
    p0 = e
    if e == 0:
        fn, kind, compute = _ones, 0.0, None
    elif e == 1:
        fn, kind, compute = IDENTITY, 0.0, None
    elif not dtype.is_floating_point:
        fn, kind, compute = _pow_int, 0.0, None
    else:
        fn, p0, kind, compute = _pow_float_fn(dtype, e, self.is_cuda)
    return elementwise(fn, [self], dtype, p0=p0, p1=kind, out=out, inplace=inplace,
                       compute_dtype=compute)  # fmt: skip


def pow_tensor_scalar(self: torch.Tensor, exponent: Any) -> torch.Tensor:
    return _pow_into(self, exponent, None, None)


def pow_scalar_(self: torch.Tensor, exponent: Any) -> torch.Tensor:
    return _pow_into(self, exponent, None, self)


def pow_tensor_scalar_out(self: torch.Tensor, exponent: Any, *, out: torch.Tensor) -> torch.Tensor:
    return _pow_into(self, exponent, out, None)


# clamp.default: the result type promotes over self and the bounds


def _clamp_into(self: torch.Tensor, min: Any, max: Any, out: Any, inplace: Any) -> torch.Tensor:
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    if self.dtype.is_complex:
        raise RuntimeError("clamp is not supported for complex types")
    bounds = (min, max) if min is not None and max is not None else (max if min is None else min,)
    dtype = result_type(self, bounds[0])
    if len(bounds) == 2:
        other = result_type(self, bounds[1])
        if other != dtype:
            dtype = torch.promote_types(dtype, other)
    if dtype == torch.bool:
        raise NotImplementedError("clamp on bool tensors")
    if len(bounds) == 2:  # a NaN bound fills NaN on every device (ATen's clamp_out)
        fn = _clamp
    elif self.is_cuda:  # CUDA eager ignores a lone NaN bound (fmaxf / fminf)
        fn = _clamp_min_cuda if max is None else _clamp_max_cuda
    else:
        fn = _clamp_min if max is None else _clamp_max
    operands = [self]
    floating = dtype.is_floating_point
    for v in bounds:
        check_number(v)
        if not floating and abs(v) >= _EXACT_INT:
            raise NotImplementedError(f"clamp bound {v} beyond float64's exact integers")
        operands.append(float(v))
    return elementwise(fn, operands, dtype, out=out, inplace=inplace)


def clamp(self: torch.Tensor, min: Any = None, max: Any = None) -> torch.Tensor:
    return _clamp_into(self, min, max, None, None)


def clamp_(self: torch.Tensor, min: Any = None, max: Any = None) -> torch.Tensor:
    return _clamp_into(self, min, max, None, self)


def clamp_out(self: torch.Tensor, min: Any = None, max: Any = None, *,
              out: torch.Tensor) -> torch.Tensor:  # fmt: skip
    return _clamp_into(self, min, max, out, None)


# masked_fill.Scalar: data movement done by the kernel alone (no fill, no copy)


def _fill_value(value: Any, dtype: torch.dtype) -> float:
    """``value`` as eager converts it to ``dtype``, with eager's overflow error."""
    check_number(value)
    v = float(value)
    limit = _FLOAT_MAX.get(dtype)  # torch.finfo(dtype).max costs 0.4 µs a call
    if limit is None:
        if dtype.is_floating_point:
            limit = torch.finfo(dtype).max
        elif dtype == torch.bool:
            return float(v != 0)
        else:
            if not (abs(v) < _EXACT_INT):
                raise NotImplementedError(f"masked_fill value {value} on {dtype}")
            info = torch.iinfo(dtype)
            if info.min <= v <= info.max:
                return float(int(v))
            limit = -1.0  # out of range: eager's error below
    if v == v and abs(v) != float("inf") and abs(v) > limit:
        raise RuntimeError(
            f"value cannot be converted to type {_C10_NAMES.get(dtype, dtype)} without overflow"
        )
    return v


_FLOAT_MAX = {
    d: torch.finfo(d).max for d in (torch.float16, torch.bfloat16, torch.float32, torch.float64)
}

_C10_NAMES = {
    torch.float16: "c10::Half", torch.bfloat16: "c10::BFloat16", torch.float32: "float",
    torch.float64: "double", torch.int8: "int8_t", torch.int16: "int16_t",
    torch.int32: "int32_t", torch.int64: "int64_t", torch.uint8: "uint8_t",
}  # fmt: skip


def _masked_fill_into(self: torch.Tensor, mask: torch.Tensor, value: Any, out: Any,
                      inplace: Any) -> torch.Tensor:  # fmt: skip
    if mask.dtype != torch.bool:
        raise RuntimeError(
            f"masked_fill_ only supports boolean masks, but got mask with dtype {mask.dtype}"
        )
    if self.dtype.is_complex:
        raise NotImplementedError("masked_fill on complex tensors")
    v = _fill_value(value, self.dtype)
    return elementwise(_masked_fill, [self, mask], self.dtype, p0=v, out=out, inplace=inplace)


def masked_fill_scalar(self: torch.Tensor, mask: torch.Tensor, value: Any) -> torch.Tensor:
    return _masked_fill_into(self, mask, value, None, None)


def masked_fill_scalar_(self: torch.Tensor, mask: torch.Tensor, value: Any) -> torch.Tensor:
    return _masked_fill_into(self, mask, value, None, self)


def masked_fill_scalar_out(self: torch.Tensor, mask: torch.Tensor, value: Any, *,
                           out: torch.Tensor) -> torch.Tensor:  # fmt: skip
    return _masked_fill_into(self, mask, value, out, None)


# minimum / maximum: NaN in either operand propagates


def _min_max(fn: Any, self: torch.Tensor, other: torch.Tensor, out: Any) -> torch.Tensor:
    dtype = result_type(self, other)
    if dtype.is_complex:
        raise RuntimeError(f"{fn.__name__.strip('_')} not implemented for complex tensors.")
    return elementwise(fn, [self, other], dtype, out=out)


def minimum(self: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    return _min_max(_minimum, self, other, None)


def minimum_out(self: torch.Tensor, other: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
    return _min_max(_minimum, self, other, out)


def maximum(self: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    return _min_max(_maximum, self, other, None)


def maximum_out(self: torch.Tensor, other: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
    return _min_max(_maximum, self, other, out)


# The C++ gate launches these without entering Python (native_launch): the unary math on
# floating inputs only (an integer one gives a floating result), minimum and maximum on
# integer tensors too (two of one dtype keep it), as _math_dtype and _min_max decide.
for _fn, _inplace, _name, _kernel in (
    (exp, False, "exp.default", _exp),
    (exp_, True, "exp_.default", _exp),
    (sqrt, False, "sqrt.default", _sqrt),
    (sqrt_, True, "sqrt_.default", _sqrt),
    (rsqrt, False, "rsqrt.default", _rsqrt),
    (rsqrt_, True, "rsqrt_.default", _rsqrt),
    (reciprocal, False, "reciprocal.default", _reciprocal),
    (reciprocal_, True, "reciprocal_.default", _reciprocal),
):
    declare_flat(_fn, (_name,), (_kernel,), 1, inplace=_inplace)
declare_flat(minimum, ("minimum.default",), (_minimum,), 2, integers=True)
declare_flat(maximum, ("maximum.default",), (_maximum,), 2, integers=True)
# masked_fill of a floating tensor by a bool mask that broadcasts to it: a fill value past
# the dtype goes to Python, which raises eager's overflow error (_fill_value)
for _fn, _inplace, _name in (
    (masked_fill_scalar, False, "masked_fill.Scalar"),
    (masked_fill_scalar_, True, "masked_fill_.Scalar"),
):
    declare_flat(_fn, (_name,), (_masked_fill,), 2, inplace=_inplace, param_args=(2, -1),
                 other="mask", fill_value=True)  # fmt: skip
# pow of a floating tensor to a number (which keeps its dtype), on CUDA as _pow_float_fn
# picks: the kernel by the exponent's exact value (CUDA eager's special cases; float16 and
# bfloat16 have their own), else powf; an integer tensor goes to Python
_POW_EXPONENTS = (0.0, 1.0, 0.5, -0.5, -1.0, 2.0, 3.0, -2.0)


def _cuda_pow_fn(dtype: torch.dtype, e: float) -> Any:
    """The kernel :func:`_pow_into` launches on CUDA for a ``dtype`` tensor to ``e`` (NaN:
    any exponent that is no special case): the gate's table is read from the same rule."""
    if e == 0:
        return _ones
    if e == 1:
        return IDENTITY
    return _pow_float_fn(dtype, e, cuda=True)[0]


_POW_KERNELS = tuple(
    {d: _cuda_pow_fn(d, e) for d in (torch.float16, torch.bfloat16, torch.float32, torch.float64)}
    for e in (*_POW_EXPONENTS, float("nan"))
)
for _fn, _inplace, _name in (
    (pow_tensor_scalar, False, "pow.Tensor_Scalar"), (pow_scalar_, True, "pow_.Scalar"),
):  # fmt: skip
    declare_flat(_fn, (_name,), _POW_KERNELS, 1, inplace=_inplace, param_args=(1, -1),
                 choice_arg=1, choice_numbers=_POW_EXPONENTS)  # fmt: skip
# clamp with both bounds given (one bound alone is clamp_min's kernel, NaN-aware per
# device): integer tensors too with integer bounds, which keep self's dtype (a float bound
# promotes, and goes to Python); bounds past float64's exact integers go to Python, which
# refuses them
for _fn, _inplace, _name in ((clamp, False, "clamp.default"), (clamp_, True, "clamp_.default")):
    declare_flat(_fn, (_name,), (_clamp_bounds,), 1, inplace=_inplace, param_args=(1, 2),
                 params_required=True, integers=True)  # fmt: skip

# the gate repeats these functions' launches (native_launch.declare_replay)
declare_replay(
    clamp,
    clamp_,
    clamp_out,
    exp,
    exp_,
    exp_out,
    masked_fill_scalar,
    masked_fill_scalar_,
    masked_fill_scalar_out,
    maximum,
    maximum_out,
    minimum,
    minimum_out,
    pow_scalar_,
    pow_tensor_scalar,
    pow_tensor_scalar_out,
    reciprocal,
    reciprocal_,
    reciprocal_out,
    rsqrt,
    rsqrt_,
    rsqrt_out,
    sqrt,
    sqrt_,
    sqrt_out,
)
