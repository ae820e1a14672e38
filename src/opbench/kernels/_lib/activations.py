"""Activations and their backward ops on the elementwise engine
(:mod:`opbench.kernels._lib.pointwise`): relu, sigmoid, tanh, silu, gelu (``none`` and
``tanh``), hardtanh, hardsigmoid, hardswish, leaky_relu and elu, with in-place and
``out=`` entry points, and threshold/hardtanh/sigmoid/tanh/silu/gelu/hardsigmoid/
hardswish/leaky_relu/elu ``_backward``. Each op is a scalar ``@triton.jit`` function
handed to the engine's kernels. Formulas follow ATen's vectorised CPU kernels (the path
eager takes for all but the last few elements of a tensor), so NaN goes where eager's does.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from opbench.kernels._lib.device_math import exp_f, expm1_f, sigmoid_f, tanh_f
from opbench.kernels._lib.native_launch import declare_flat, declare_replay
from opbench.kernels._lib.pointwise import backward_op, elementwise, unary
from opbench.kernels._lib.pointwise_rules import check_number, require_float, result_type


@triton.jit
def _relu(a, b, c, p0, p1):
    return tl.where(a < 0, 0, a)  # NaN stays NaN


@triton.jit
def _threshold_backward(a, b, c, p0, p1):
    # grad, self, threshold: eager's self <= threshold ? 0 : grad
    return tl.where(b <= p0, 0, a)


@triton.jit
def _hardtanh(a, b, c, p0, p1):
    return tl.where(a < p0, p0, tl.where(a > p1, p1, a))


@triton.jit
def _hardtanh_backward(a, b, c, p0, p1):
    return tl.where((b <= p0) | (b >= p1), 0, a)


@triton.jit
def _sigmoid(a, b, c, p0, p1):
    return sigmoid_f(a)


@triton.jit
def _sigmoid_backward(a, b, c, p0, p1):
    # grad, output
    return a * (1.0 - b) * b


@triton.jit
def _tanh(a, b, c, p0, p1):
    return tanh_f(a)


@triton.jit
def _tanh_backward(a, b, c, p0, p1):
    # grad, output
    return a * (1.0 - b * b)


@triton.jit
def _silu(a, b, c, p0, p1):
    return a * sigmoid_f(a)


@triton.jit
def _silu_backward(a, b, c, p0, p1):
    # grad, self
    s = sigmoid_f(b)
    return a * s * (1.0 + b * (1.0 - s))


@triton.jit
def _gelu(a, b, c, p0, p1):
    return 0.5 * a * (1.0 + tl.math.erf(a * 0.7071067811865476))


@triton.jit
def _gelu_tanh(a, b, c, p0, p1):
    inner = 0.7978845608028654 * (a + 0.044715 * a * a * a)
    return 0.5 * a * (1.0 + tanh_f(inner))


@triton.jit
def _gelu_backward(a, b, c, p0, p1):
    # grad, self (approximate='none')
    cdf = 0.5 * (1.0 + tl.math.erf(b * 0.7071067811865476))
    pdf = tl.exp(-0.5 * b * b) * 0.3989422804014327
    return a * (cdf + b * pdf)


@triton.jit
def _gelu_tanh_backward(a, b, c, p0, p1):
    # grad, self (approximate='tanh'), as ATen's GeluBackward
    x_sq = b * b
    inner = 0.7978845608028654 * (b + 0.044715 * x_sq * b)
    t = tanh_f(inner)
    left = 0.5 * b
    right = 1.0 + t
    left_d = 0.5 * right
    right_d = left * (1.0 - t * t) * 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * x_sq)
    return a * (left_d + right_d)


def relu(self: torch.Tensor) -> torch.Tensor:
    return unary(_relu, self, None, None, floats_only=False)


def relu_(self: torch.Tensor) -> torch.Tensor:
    return unary(_relu, self, None, self, floats_only=False)


# Like math_ops.exp/_/_out, kept apart: one def per ATen schema, each a one-line call
def sigmoid(self: torch.Tensor) -> torch.Tensor:
    return unary(_sigmoid, self, None, None)


def sigmoid_(self: torch.Tensor) -> torch.Tensor:
    return unary(_sigmoid, self, None, self)


def sigmoid_out(self: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
    return unary(_sigmoid, self, out, None)


def tanh(self: torch.Tensor) -> torch.Tensor:
    return unary(_tanh, self, None, None)


def tanh_(self: torch.Tensor) -> torch.Tensor:
    return unary(_tanh, self, None, self)


def tanh_out(self: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
    return unary(_tanh, self, out, None)


def silu(self: torch.Tensor) -> torch.Tensor:
    return unary(_silu, self, None, None)


def silu_(self: torch.Tensor) -> torch.Tensor:
    return unary(_silu, self, None, self)


def silu_out(self: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
    return unary(_silu, self, out, None)


def _gelu_fn(approximate: str, exact: Any, tanh_form: Any) -> Any:
    if approximate == "none":
        return exact
    if approximate == "tanh":
        return tanh_form
    raise RuntimeError("approximate argument must be either none or tanh.")


def gelu(self: torch.Tensor, *, approximate: str = "none") -> torch.Tensor:
    return unary(_gelu_fn(approximate, _gelu, _gelu_tanh), self, None, None)


def gelu_(self: torch.Tensor, *, approximate: str = "none") -> torch.Tensor:
    return unary(_gelu_fn(approximate, _gelu, _gelu_tanh), self, None, self)


def gelu_out(self: torch.Tensor, *, approximate: str = "none", out: torch.Tensor) -> torch.Tensor:
    return unary(_gelu_fn(approximate, _gelu, _gelu_tanh), self, out, None)


def hardtanh(self: torch.Tensor, min_val: float = -1.0, max_val: float = 1.0) -> torch.Tensor:
    return unary(_hardtanh, self, None, None, floats_only=False, p0=min_val, p1=max_val)


def hardtanh_(self: torch.Tensor, min_val: float = -1.0, max_val: float = 1.0) -> torch.Tensor:
    return unary(_hardtanh, self, None, self, floats_only=False, p0=min_val, p1=max_val)


def hardtanh_out(self: torch.Tensor, min_val: float = -1.0, max_val: float = 1.0, *,
                 out: torch.Tensor) -> torch.Tensor:  # fmt: skip
    return unary(_hardtanh, self, out, None, floats_only=False, p0=min_val, p1=max_val)


def threshold_backward(grad_output: torch.Tensor, self: torch.Tensor, threshold: float, *,
                       grad_input: Any = None) -> torch.Tensor:  # fmt: skip
    return backward_op(_threshold_backward, grad_output, self, grad_input, p0=threshold)


def hardtanh_backward(grad_output: torch.Tensor, self: torch.Tensor, min_val: float,
                      max_val: float, *, grad_input: Any = None) -> torch.Tensor:  # fmt: skip
    return backward_op(_hardtanh_backward, grad_output, self, grad_input, p0=min_val, p1=max_val)


def sigmoid_backward(grad_output: torch.Tensor, output: torch.Tensor, *,
                     grad_input: Any = None) -> torch.Tensor:  # fmt: skip
    return backward_op(_sigmoid_backward, grad_output, output, grad_input)


def tanh_backward(grad_output: torch.Tensor, output: torch.Tensor, *,
                  grad_input: Any = None) -> torch.Tensor:  # fmt: skip
    return backward_op(_tanh_backward, grad_output, output, grad_input)


def silu_backward(grad_output: torch.Tensor, self: torch.Tensor, *,
                  grad_input: Any = None) -> torch.Tensor:  # fmt: skip
    return backward_op(_silu_backward, grad_output, self, grad_input)


def gelu_backward(grad_output: torch.Tensor, self: torch.Tensor, *, approximate: str = "none",
                  grad_input: Any = None) -> torch.Tensor:  # fmt: skip
    fn = _gelu_fn(approximate, _gelu_backward, _gelu_tanh_backward)
    return backward_op(fn, grad_output, self, grad_input)


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
def _hardswish_backward_cuda(a, b, c, p0, p1):
    # CUDA eager's functor: 0 for x <= -3, grad * (x / 3 + 0.5) for x < 3, else grad
    # (NaN x included: its comparisons are false)
    mid = a * (b / 3.0 + 0.5)
    return tl.where(b <= -3.0, 0.0, tl.where(b < 3.0, mid, a))


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


@triton.jit
def _elu_backward_cuda(a, b, c, p0, p1):
    # CUDA eager's functor tests x <= 0 (the CPU's vector path x > 0): a NaN x takes the
    # positive branch there
    return tl.where(b <= 0, a * c * p0 * exp_f(b * c), a * p1)


@triton.jit
def _elu_backward_result_cuda(a, b, c, p0, p1):
    return tl.where(b <= 0, a * c * (b + p0), a * p1)


# ----------------------------------------------------------------------------- more ATen ops


def hardsigmoid(self: torch.Tensor) -> torch.Tensor:
    return unary(_hardsigmoid, self, None, None, op="hardsigmoid")


def hardsigmoid_(self: torch.Tensor) -> torch.Tensor:
    return unary(_hardsigmoid, self, None, self, op="hardsigmoid")


def hardsigmoid_out(self: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
    return unary(_hardsigmoid, self, out, None, op="hardsigmoid")


def hardswish(self: torch.Tensor) -> torch.Tensor:
    return unary(_hardswish, self, None, None, op="hardswish")


def hardswish_(self: torch.Tensor) -> torch.Tensor:
    return unary(_hardswish, self, None, self, op="hardswish")


def hardswish_out(self: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
    return unary(_hardswish, self, out, None, op="hardswish")


def leaky_relu(self: torch.Tensor, negative_slope: float = 0.01) -> torch.Tensor:
    return unary(_leaky_relu, self, None, None, op="leaky_relu", p0=negative_slope)


def leaky_relu_(self: torch.Tensor, negative_slope: float = 0.01) -> torch.Tensor:
    return unary(_leaky_relu, self, None, self, op="leaky_relu", p0=negative_slope)


def leaky_relu_out(self: torch.Tensor, negative_slope: float = 0.01, *,
                   out: torch.Tensor) -> torch.Tensor:  # fmt: skip
    return unary(_leaky_relu, self, out, None, op="leaky_relu", p0=negative_slope)


def _elu_into(self: torch.Tensor, alpha: float, scale: float, input_scale: float, out: Any,
              inplace: Any) -> torch.Tensor:  # fmt: skip
    require_float("elu", self)
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
    fn = _hardswish_backward_cuda if self.is_cuda else _hardswish_backward
    return backward_op(fn, grad_output, self, out)


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
    dtype = result_type(grad_output, self_or_result)
    if not dtype.is_floating_point:
        raise NotImplementedError("elu_backward on integer tensors")
    if self_or_result.is_cuda:
        fn = _elu_backward_result_cuda if is_result else _elu_backward_cuda
    else:
        fn = _elu_backward_result if is_result else _elu_backward
    operands = [grad_output, self_or_result, float(input_scale)]
    return elementwise(fn, operands, dtype, out=grad_input, p0=float(alpha) * float(scale),
                       p1=float(scale))  # fmt: skip


# The C++ gate launches these without entering Python (native_launch): the activations and
# their backward ops the traced models call most.
declare_flat(relu, ("relu.default",), (_relu,), 1)
declare_flat(relu_, ("relu_.default",), (_relu,), 1, inplace=True)
declare_flat(sigmoid, ("sigmoid.default",), (_sigmoid,), 1)
declare_flat(tanh, ("tanh.default",), (_tanh,), 1)
declare_flat(silu, ("silu.default",), (_silu,), 1)
declare_flat(silu_, ("silu_.default",), (_silu,), 1, inplace=True)
declare_flat(
    gelu, ("gelu.default",), (_gelu, _gelu_tanh), 1, choice_arg=1, choices=("none", "tanh")
)
declare_flat(threshold_backward, ("threshold_backward.default",), (_threshold_backward,), 2,
             param_args=(2, -1))  # fmt: skip
declare_flat(tanh_backward, ("tanh_backward.default",), (_tanh_backward,), 2)
declare_flat(sigmoid_backward, ("sigmoid_backward.default",), (_sigmoid_backward,), 2)
declare_flat(silu_backward, ("silu_backward.default",), (_silu_backward,), 2)
declare_flat(gelu_backward, ("gelu_backward.default",), (_gelu_backward, _gelu_tanh_backward), 2,
             choice_arg=2, choices=("none", "tanh"))  # fmt: skip
# the hard activations and leaky_relu (MobileNet's, EfficientNet's and GAN's calls):
# hardtanh's p0/p1 are min_val/max_val, leaky_relu's p0 its slope; the gate launches only
# CUDA tensors, so hardswish_backward takes CUDA eager's functor, as its Python path does there
declare_flat(hardtanh, ("hardtanh.default",), (_hardtanh,), 1, param_args=(1, 2),
             param_defaults=(-1.0, 1.0))  # fmt: skip
declare_flat(hardtanh_, ("hardtanh_.default",), (_hardtanh,), 1, inplace=True, param_args=(1, 2),
             param_defaults=(-1.0, 1.0))  # fmt: skip
declare_flat(hardtanh_backward, ("hardtanh_backward.default",), (_hardtanh_backward,), 2,
             param_args=(2, 3))  # fmt: skip
declare_flat(hardsigmoid, ("hardsigmoid.default",), (_hardsigmoid,), 1)
declare_flat(hardsigmoid_, ("hardsigmoid_.default",), (_hardsigmoid,), 1, inplace=True)
declare_flat(hardsigmoid_backward, ("hardsigmoid_backward.default",), (_hardsigmoid_backward,), 2)
declare_flat(hardswish, ("hardswish.default",), (_hardswish,), 1)
declare_flat(hardswish_, ("hardswish_.default",), (_hardswish,), 1, inplace=True)
declare_flat(hardswish_backward, ("hardswish_backward.default",), (_hardswish_backward_cuda,), 2)
declare_flat(leaky_relu, ("leaky_relu.default",), (_leaky_relu,), 1, param_args=(1, -1),
             param_defaults=(0.01, 0.0))  # fmt: skip
declare_flat(leaky_relu_, ("leaky_relu_.default",), (_leaky_relu,), 1, inplace=True,
             param_args=(1, -1), param_defaults=(0.01, 0.0))  # fmt: skip
# self_is_result (the backward of an in-place leaky_relu_) with a negative slope: eager
# refuses it, so those calls go to Python, which raises its error
declare_flat(leaky_relu_backward, ("leaky_relu_backward.default",), (_leaky_relu_backward,), 2,
             param_args=(2, -1), is_result_arg=3)  # fmt: skip

# the gate repeats these functions' launches (native_launch.declare_replay)
declare_replay(
    elu,
    elu_,
    elu_backward,
    elu_out,
    gelu,
    gelu_,
    gelu_backward,
    gelu_out,
    hardsigmoid,
    hardsigmoid_,
    hardsigmoid_backward,
    hardsigmoid_out,
    hardswish,
    hardswish_,
    hardswish_backward,
    hardswish_out,
    hardtanh,
    hardtanh_,
    hardtanh_backward,
    hardtanh_out,
    leaky_relu,
    leaky_relu_,
    leaky_relu_backward,
    leaky_relu_out,
    relu,
    relu_,
    sigmoid,
    sigmoid_,
    sigmoid_backward,
    sigmoid_out,
    silu,
    silu_,
    silu_backward,
    silu_out,
    tanh,
    tanh_,
    tanh_backward,
    tanh_out,
    threshold_backward,
)
