"""Operator rules: the values an operator's domain needs, and the table of every rule.

A rule narrows how :func:`opbench.suites.inputs.make_inputs` draws one call's values
(``log`` gets positive inputs, ``isnan`` some NaNs, ``eq`` whole numbers so equality
hits) or derives saved state consistent with the inputs (a softmax's output, the mean and
rstd a norm's backward reads). Owns those rules and :data:`RULES`, the table from an
operator family to its rule, with the index rules of
:mod:`opbench.suites.input_index_rules` merged in.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from opbench.spec.args import TensorSpec
from opbench.suites.input_call import (
    DEFAULT,
    DISCRETE,
    NONZERO,
    POSITIVE,
    PROB,
    SPECIAL,
    Call,
    Kind,
    draw,
    has_overlap,
    int_arg,
    mix_seed,
    not_runnable,
)
from opbench.suites.input_index_rules import INDEX_RULES

__all__ = ["RULES"]


# --------------------------------------------------------------------------- value domains


def _rule_bce(call: Call) -> None:
    call.set_kind("self", PROB)
    call.set_kind("target", PROB)
    call.set_kind("weight", POSITIVE)


def _rule_bce_logits(call: Call) -> None:
    call.set_kind("target", PROB)
    call.set_kind("pos_weight", POSITIVE)
    call.set_kind("weight", POSITIVE)


def _rule_kl_div(call: Call) -> None:
    if not call.spec("log_target"):
        call.set_kind("target", PROB)


def _positive_self(call: Call) -> None:
    call.set_kind("self", POSITIVE)


def _unit_self(call: Call) -> None:
    call.set_kind("self", Kind("unit", scale=0.99))


def _special_self(call: Call) -> None:
    call.set_kind("self", SPECIAL)


def _discrete_operands(call: Call) -> None:
    for name in ("self", "other"):
        s = call.spec(name)
        if isinstance(s, TensorSpec) and (s.dtype.is_floating_point or s.dtype.is_complex):
            call.set_kind(name, DISCRETE)


def _exp_family(call: Call) -> None:
    s = call.tensor_spec("self")
    if s.dtype.is_floating_point:
        bound = math.log(torch.finfo(s.dtype).max) * 0.9
        if call.op.startswith("exp2"):
            bound /= math.log(2)
        call.set_kind("self", Kind("bounded", scale=bound))


def _rule_pow(call: Call) -> None:
    exp = call.spec("exponent")
    base = call.spec("self")
    if isinstance(base, TensorSpec):
        if isinstance(exp, TensorSpec) or (isinstance(exp, float) and not float(exp).is_integer()):
            call.set_kind("self", POSITIVE)
        return
    # pow.Scalar: a number raised to a tensor: keep base**x representable.
    if (
        isinstance(exp, TensorSpec)
        and isinstance(base, (int, float))
        and exp.dtype.is_floating_point
    ):
        if base > 0 and base != 1:
            limit = math.log(torch.finfo(exp.dtype).max) / abs(math.log(base)) * 0.9
            call.set_kind("exponent", Kind("unit", scale=min(limit, 4.0)))
        elif base <= 0:
            call.set_kind("exponent", DISCRETE)


def _rule_divide(call: Call) -> None:
    other = call.spec("other")
    if isinstance(other, TensorSpec) and not other.dtype.is_floating_point:
        call.set_kind("other", NONZERO)


def _rule_grid_sampler(call: Call) -> None:
    call.set_kind("grid", Kind("unit", scale=1.1))


def _rule_nonzero(call: Call) -> None:
    s = call.tensor_spec("self")
    if s.dtype.is_floating_point:
        call.set_kind("self", DISCRETE)


def _rule_sigmoid_backward(call: Call) -> None:
    call.set_kind("output", PROB)


def _rule_tanh_backward(call: Call) -> None:
    call.set_kind("output", Kind("unit", scale=0.99))


# --------------------------------------------------------------------------- saved state


def _forward_output(
    fn: Callable[[Call, torch.Tensor], torch.Tensor], out_name: str
) -> Callable[[Call], None]:
    """Derive a saved-output argument by running the forward on a fresh input."""

    def rule(call: Call) -> None:
        spec = call.tensor_spec(out_name)

        def derive(c: Call) -> None:
            g = torch.Generator().manual_seed(mix_seed(c.seed, ("forward-input", out_name)))
            x = draw(spec.numel, torch.float32, DEFAULT, g).reshape(spec.shape)
            c.replace(out_name, fn(c, x))

        call.derives.append(derive)

    return rule


def _softmax_out(c: Call, x: torch.Tensor) -> torch.Tensor:
    # in float64, rounded once: the same float32 bits whatever the thread count (the
    # vectorised and scalar paths, whose split follows the threads, differ in the last bit)
    return torch.softmax(x.double(), int_arg(c, "dim")).to(x.dtype)


def _log_softmax_out(c: Call, x: torch.Tensor) -> torch.Tensor:
    return torch.log_softmax(x.double(), int_arg(c, "dim")).to(x.dtype)


def _rule_threshold_backward(call: Call) -> None:
    """``self`` as a ReLU's output: exact threshold values exercise the boundary."""
    thr = call.spec("threshold")
    spec = call.tensor_spec("self")
    if not isinstance(thr, (int, float)) or not spec.dtype.is_floating_point:
        return

    def derive(c: Call) -> None:
        x = c.value("self")
        if has_overlap(x):
            return
        c.replace("self", torch.clamp_min(x.float(), float(thr)))

    call.derives.append(derive)


def _stats(x: torch.Tensor, dims: list[int], eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    x = x.double()
    mean = x.mean(dims, keepdim=True)
    var = x.var(dims, unbiased=False, keepdim=True)
    return mean, torch.rsqrt(var + eps)


def _rule_layer_norm_backward(call: Call) -> None:
    inp = call.tensor_spec("input")
    ns = call.spec("normalized_shape")
    k = len(ns) if isinstance(ns, (list, tuple)) else 1
    call.set_kind("rstd", POSITIVE)

    def derive(c: Call) -> None:
        dims = list(range(len(inp.shape) - k, len(inp.shape)))
        mean, rstd = _stats(c.value("input"), dims, 1e-5)
        c.replace("mean", mean)
        c.replace("rstd", rstd)

    call.derives.append(derive)


def _rule_batch_norm(call: Call) -> None:
    for name in ("running_var", "save_invstd", "invstd"):
        if call.tensor_spec(name, required=False) is not None:
            call.set_kind(name, POSITIVE)


def _rule_batch_norm_backward(call: Call) -> None:
    _rule_batch_norm(call)
    inp = call.tensor_spec("input")
    if not call.spec("train"):
        return
    if call.tensor_spec("save_mean", required=False) is None:
        return
    eps = call.spec("eps")
    eps = float(eps) if isinstance(eps, (int, float)) else 1e-5

    def derive(c: Call) -> None:
        dims = [d for d in range(len(inp.shape)) if d != 1]
        mean, invstd = _stats(c.value("input"), dims, eps)
        c.replace("save_mean", mean.reshape(-1))
        c.replace("save_invstd", invstd.reshape(-1))

    call.derives.append(derive)


def _rule_group_norm_backward(call: Call) -> None:
    call.set_kind("rstd", POSITIVE)
    n, group = int_arg(call, "N"), int_arg(call, "group")

    def derive(c: Call) -> None:
        x = c.value("input").reshape(n, group, -1)
        mean, rstd = _stats(x, [2], 1e-5)
        c.replace("mean", mean.reshape(n, group))
        c.replace("rstd", rstd.reshape(n, group))

    call.derives.append(derive)


RULES: dict[str, Callable[[Call], None]] = {
    **INDEX_RULES,
    "binary_cross_entropy": _rule_bce,
    "binary_cross_entropy_backward": _rule_bce,
    "binary_cross_entropy_with_logits": _rule_bce_logits,
    "kl_div": _rule_kl_div,
    "log": _positive_self,
    "log2": _positive_self,
    "log10": _positive_self,
    "log1p": _positive_self,
    "sqrt": _positive_self,
    "rsqrt": _positive_self,
    "lgamma": _positive_self,
    "digamma": _positive_self,
    "acosh": lambda c: c.set_kind("self", Kind("positive")),
    "asin": _unit_self,
    "acos": _unit_self,
    "atanh": _unit_self,
    "erfinv": _unit_self,
    "isnan": _special_self,
    "isinf": _special_self,
    "isfinite": _special_self,
    "isposinf": _special_self,
    "isneginf": _special_self,
    "nan_to_num": _special_self,
    "eq": _discrete_operands,
    "ne": _discrete_operands,
    "exp": _exp_family,
    "exp2": _exp_family,
    "expm1": _exp_family,
    "sinh": _exp_family,
    "cosh": _exp_family,
    "pow": _rule_pow,
    "float_power": _rule_pow,
    "div": _rule_divide,
    "floor_divide": _rule_divide,
    "remainder": _rule_divide,
    "fmod": _rule_divide,
    "grid_sampler_2d": _rule_grid_sampler,
    "grid_sampler_2d_backward": _rule_grid_sampler,
    "grid_sampler_3d": _rule_grid_sampler,
    "_softmax_backward_data": _forward_output(_softmax_out, "output"),
    "_log_softmax_backward_data": _forward_output(_log_softmax_out, "output"),
    "sigmoid_backward": _rule_sigmoid_backward,
    "tanh_backward": _rule_tanh_backward,
    "threshold_backward": _rule_threshold_backward,
    "native_layer_norm_backward": _rule_layer_norm_backward,
    "native_batch_norm": _rule_batch_norm,
    "_native_batch_norm_legit": _rule_batch_norm,
    "_native_batch_norm_legit_no_training": _rule_batch_norm,
    "batch_norm": _rule_batch_norm,
    "native_batch_norm_backward": _rule_batch_norm_backward,
    "native_group_norm_backward": _rule_group_norm_backward,
    "nonzero": _rule_nonzero,
    "count_nonzero": _rule_nonzero,
    "argwhere": _rule_nonzero,
    "_cudnn_rnn_backward": not_runnable(
        "_cudnn_rnn_backward needs the reserve buffer of a matching forward call"
    ),
    "_sparse_coo_tensor_with_dims_and_tensors": not_runnable(
        "sparse tensor construction: indices and layout are not generated"
    ),
}
