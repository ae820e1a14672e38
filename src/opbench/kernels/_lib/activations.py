"""Activations beyond the basic ones: hardsigmoid, hardswish, leaky_relu and elu, with
their in-place, ``out=`` and backward ops, on the elementwise kernels of
:mod:`opbench.kernels._lib.pointwise` (each op is a scalar ``@triton.jit`` function
passed to them as a constexpr). Formulas follow ATen's vectorised CPU kernels (the path
eager takes for all but the last few elements of a tensor), so NaN goes where eager's
does.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from opbench.kernels._lib.pointwise import (
    backward_op,
    check_number,
    dtype_name,
    elementwise,
    exp_f,
    expm1_f,
)


@triton.jit
def _hardsigmoid(a, b, c, p0, p1):
    t = a + 3.0
    t = tl.where(t < 0.0, 0.0, t)  # NaN stays NaN (eager's maximum/minimum propagate it)
    t = tl.where(t > 6.0, 6.0, t)
    return t / 6.0


@triton.jit
def _hardsigmoid_backward(a, b, c, p0, p1):
    # grad, self: grad / 6 strictly inside (-3, 3), else 0 (NaN too)
    return tl.where((b > -3.0) & (b < 3.0), a * (1.0 / 6.0), 0.0)


@triton.jit
def _hardswish(a, b, c, p0, p1):
    t = a + 3.0
    t = tl.where(t < 0.0, 0.0, t)
    t = tl.where(t > 6.0, 6.0, t)
    return a * t / 6.0


@triton.jit
def _hardswish_backward(a, b, c, p0, p1):
    # grad, self, as eager's vectorised kernel: 0 for x <= -3, grad for x >= 3,
    # grad * (x / 3 + 0.5) between (and for NaN, which gives NaN)
    mid = a * (b / 3.0 + 0.5)
    return tl.where(b <= -3.0, 0.0, tl.where(b >= 3.0, a, mid))


@triton.jit
def _leaky_relu(a, b, c, p0, p1):
    # p0 = negative_slope
    return tl.where(a > 0, a, a * p0)


@triton.jit
def _leaky_relu_backward(a, b, c, p0, p1):
    # grad, self, p0 = negative_slope
    return tl.where(b > 0, a, a * p0)


@triton.jit
def _elu(a, b, c, p0, p1):
    # self, input_scale; p0 = alpha * scale, p1 = scale
    return tl.where(a > 0, a * p1, expm1_f(a * b) * p0)


@triton.jit
def _elu_backward(a, b, c, p0, p1):
    # grad, self, input_scale; p0 = alpha * scale, p1 = scale
    return tl.where(b > 0, a * p1, a * c * p0 * exp_f(b * c))


@triton.jit
def _elu_backward_result(a, b, c, p0, p1):
    # grad, result, input_scale; p0 = alpha * scale, p1 = scale
    return tl.where(b > 0, a * p1, a * c * (b + p0))


# ----------------------------------------------------------------------------- more ATen ops


def _floats_only(op: str, *tensors: torch.Tensor) -> None:
    """Eager implements these activations for floating types only."""
    for t in tensors:
        if not t.dtype.is_floating_point:
            raise NotImplementedError(f"\"{op}\" not implemented for '{dtype_name(t.dtype)}'")


def _activation(fn: Any, op: str, self: torch.Tensor, out: Any, inplace: Any,
                p0: float = 0.0, p1: float = 0.0) -> torch.Tensor:  # fmt: skip
    _floats_only(op, self)
    return elementwise(fn, [self], self.dtype, out=out, inplace=inplace, p0=p0, p1=p1)


def hardsigmoid(self: torch.Tensor) -> torch.Tensor:
    return _activation(_hardsigmoid, "hardsigmoid", self, None, None)


def hardsigmoid_(self: torch.Tensor) -> torch.Tensor:
    return _activation(_hardsigmoid, "hardsigmoid", self, None, self)


def hardsigmoid_out(self: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
    return _activation(_hardsigmoid, "hardsigmoid", self, out, None)


def hardswish(self: torch.Tensor) -> torch.Tensor:
    return _activation(_hardswish, "hardswish", self, None, None)


def hardswish_(self: torch.Tensor) -> torch.Tensor:
    return _activation(_hardswish, "hardswish", self, None, self)


def hardswish_out(self: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
    return _activation(_hardswish, "hardswish", self, out, None)


def leaky_relu(self: torch.Tensor, negative_slope: float = 0.01) -> torch.Tensor:
    return _activation(_leaky_relu, "leaky_relu", self, None, None, p0=negative_slope)


def leaky_relu_(self: torch.Tensor, negative_slope: float = 0.01) -> torch.Tensor:
    return _activation(_leaky_relu, "leaky_relu", self, None, self, p0=negative_slope)


def leaky_relu_out(self: torch.Tensor, negative_slope: float = 0.01, *,
                   out: torch.Tensor) -> torch.Tensor:  # fmt: skip
    return _activation(_leaky_relu, "leaky_relu", self, out, None, p0=negative_slope)


def _elu_into(self: torch.Tensor, alpha: float, scale: float, input_scale: float, out: Any,
              inplace: Any) -> torch.Tensor:  # fmt: skip
    _floats_only("elu", self)
    for v in (alpha, scale, input_scale):
        check_number(v)
    operands = [self, float(input_scale)]
    negcoef = float(alpha) * float(scale)
    return elementwise(_elu, operands, self.dtype, out=out, inplace=inplace, p0=negcoef,
                       p1=float(scale))  # fmt: skip


def elu(self: torch.Tensor, alpha: float = 1, scale: float = 1,
        input_scale: float = 1) -> torch.Tensor:  # fmt: skip
    return _elu_into(self, alpha, scale, input_scale, None, None)


def elu_(self: torch.Tensor, alpha: float = 1, scale: float = 1,
         input_scale: float = 1) -> torch.Tensor:  # fmt: skip
    return _elu_into(self, alpha, scale, input_scale, None, self)


def elu_out(self: torch.Tensor, alpha: float = 1, scale: float = 1, input_scale: float = 1, *,
            out: torch.Tensor) -> torch.Tensor:  # fmt: skip
    return _elu_into(self, alpha, scale, input_scale, out, None)


def hardsigmoid_backward(grad_output: torch.Tensor, self: torch.Tensor, *,
                         grad_input: Any = None) -> torch.Tensor:  # fmt: skip
    return backward_op(_hardsigmoid_backward, grad_output, self, grad_input)


def hardswish_backward(grad_output: torch.Tensor, self: torch.Tensor, *,
                       out: Any = None) -> torch.Tensor:  # fmt: skip
    return backward_op(_hardswish_backward, grad_output, self, out)


_INPLACE_BACKWARD = (
    "In-place {op} backward calculation is triggered with a negative slope which is not "
    "supported. This is caused by calling in-place forward function with a negative slope, "
    "please call out-of-place version instead. File an issue at "
    "https://github.com/pytorch/pytorch if you do require supporting in-place {name} "
    "backward calculation with negative slope"
)


def leaky_relu_backward(grad_output: torch.Tensor, self: torch.Tensor, negative_slope: float,
                        self_is_result: bool, *, grad_input: Any = None) -> torch.Tensor:  # fmt: skip
    check_number(negative_slope)
    if self_is_result and negative_slope < 0:
        raise RuntimeError(_INPLACE_BACKWARD.format(op="leakyReLu", name="leakRelu"))
    return backward_op(_leaky_relu_backward, grad_output, self, grad_input, p0=negative_slope)


def elu_backward(grad_output: torch.Tensor, alpha: float, scale: float, input_scale: float,
                 is_result: bool, self_or_result: torch.Tensor, *,
                 grad_input: Any = None) -> torch.Tensor:  # fmt: skip
    for v in (alpha, scale, input_scale):
        check_number(v)
    if is_result and alpha < 0:
        raise RuntimeError(_INPLACE_BACKWARD.format(op="elu", name="elu"))
    dtype = torch.result_type(grad_output, self_or_result)
    if not dtype.is_floating_point:
        raise NotImplementedError("elu_backward on integer tensors")
    fn = _elu_backward_result if is_result else _elu_backward
    operands = [grad_output, self_or_result, float(input_scale)]
    return elementwise(fn, operands, dtype, out=grad_input, p0=float(alpha) * float(scale),
                       p1=float(scale))  # fmt: skip
