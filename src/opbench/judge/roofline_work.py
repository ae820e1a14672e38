"""What one test must move and compute: the bytes and FLOPs of one operator call.

Owns :class:`Work` and :func:`work_of` (with :func:`unique_bytes`), the counts the
roofline (:mod:`opbench.judge.roofline`) divides by the device's peaks.

Counting rules (the ``formula`` field of :class:`Work` says which applied):

* **Bytes read** are unique storage: tensors on one storage count the union of the byte
  spans they reach, capped by their element count (a stride-0 expanded tensor counts
  one element; a strided slice counts its elements, not the gaps). Arguments the op does
  not read are skipped (``out=`` tensors, the destination of ``copy_``/``fill_``, the
  template of ``new_*``/``*_like``); for gathers (``embedding``, ``index``,
  ``index_select``, ``gather``, ``nll_loss_forward``, ``_embedding_bag``) the source
  counts only as many bytes as the gathered output.
* **Bytes written** are the outputs' unique storage, except outputs that are views of
  an input (a pure view op, or an in-place metadata op like ``unsqueeze_``, moves
  nothing: read and written are both 0) and in-place scatters (``index_put_``, ``index_add_``,
  ``scatter*_``, ``masked_fill_``) whose partial writes count 0. Undercounting is the
  safe side: these bytes are a floor, used to call a time impossible.
* **FLOPs**: matmul family ``2*M*N*K`` (plus ``M*N`` for a bias / ``beta*C``), batched
  forms times the batch; convolution ``2 * out_elements * C_in/groups * kernel_volume``
  (transposed: input elements and ``C_out/groups``), ``convolution_backward`` that per
  requested gradient (input, weight) plus the bias sum; reductions one per input
  element; norms ~5 per element forward, ~8 backward; softmax ~5 (backward ~3);
  elementwise one per output element; everything else bytes only (0 FLOPs).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import torch

from opbench.spec.ops import base_name
from opbench.suites.materialize import tensors_in

__all__ = ["Work", "unique_bytes", "work_of"]


@dataclass
class Work:
    """What one call must do: ``bytes`` (read + written), ``flops``, and how it was counted."""

    bytes: int
    flops: int
    formula: str
    read_bytes: int = 0
    write_bytes: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# --------------------------------------------------------------------------- bytes


def _storage_key(t: torch.Tensor) -> tuple[Any, ...]:
    try:
        st = t.untyped_storage()
        return (t.device.type, t.device.index, st.data_ptr(), st.nbytes())
    except (RuntimeError, NotImplementedError):
        return ("noshare", id(t))


def _span(t: torch.Tensor) -> tuple[int, int]:
    """Byte interval ``[lo, hi)`` of the storage ``t`` reaches (empty when numel is 0)."""
    if t.numel() == 0:
        return (0, 0)
    size = t.element_size()
    off = t.storage_offset()
    last = off + sum((n - 1) * s for n, s in zip(t.shape, t.stride()) if n > 0)
    return (off * size, (last + 1) * size)


def unique_bytes(tensors: list[torch.Tensor]) -> int:
    """Bytes of unique storage the tensors reach.

    Per storage: the union of the tensors' byte spans, capped by the sum of their
    element bytes (so a strided slice counts its elements, a stride-0 tensor its one
    element, and two views of one buffer count it once).
    """
    groups: dict[tuple[Any, ...], list[torch.Tensor]] = {}
    for t in tensors:
        if t.layout != torch.strided:
            groups.setdefault(("noshare", id(t)), []).append(t)
        else:
            groups.setdefault(_storage_key(t), []).append(t)
    total = 0
    for ts in groups.values():
        if ts[0].layout != torch.strided:
            total += ts[0].numel() * ts[0].element_size()
            continue
        spans = sorted(_span(t) for t in ts if t.numel() > 0)
        union = 0
        cur_lo = cur_hi = None
        for lo, hi in spans:
            if cur_hi is None or lo > cur_hi:
                if cur_hi is not None:
                    union += cur_hi - cur_lo
                cur_lo, cur_hi = lo, hi
            else:
                cur_hi = max(cur_hi, hi)
        if cur_hi is not None:
            union += cur_hi - cur_lo
        elems = sum(t.numel() * t.element_size() for t in ts)
        total += min(union, elems)
    return total


# Ops that do not read the data of some arguments (by schema name).
_NOT_READ: dict[str, set[str]] = {
    "new_zeros": {"self"},
    "new_empty": {"self"},
    "new_ones": {"self"},
    "new_full": {"self"},
    "new_empty_strided": {"self"},
    "empty_like": {"self"},
    "zeros_like": {"self"},
    "ones_like": {"self"},
    "full_like": {"self"},
    "rand_like": {"self"},
    "randn_like": {"self"},
    "fill_": {"self"},
    "zero_": {"self"},
    "bernoulli_": {"self"},
    "normal_": {"self"},
    "uniform_": {"self"},
    "random_": {"self"},
    "exponential_": {"self"},
    "copy_": {"self"},
    "nll_loss_backward": {"self"},
    "as_strided_": {"self"},
    "unsqueeze_": {"self"},
}
# Gathers: the named source is read only where the output needs it.
_GATHER_SOURCE: dict[str, str] = {
    "embedding": "weight",
    "_embedding_bag": "weight",
    "index": "self",
    "index_select": "self",
    "gather": "self",
    "take": "self",
    "nll_loss_forward": "self",
}
# In-place scatters: self is neither fully read nor fully written.
_PARTIAL_INPLACE = {
    "index_put_",
    "_index_put_impl_",
    "index_add_",
    "scatter_",
    "scatter_add_",
    "scatter_reduce_",
    "masked_fill_",
    "masked_scatter_",
    "index_fill_",
    "index_copy_",
}


# In-place ops that change only metadata (sizes, strides): no bytes move.
_METADATA_INPLACE = {
    "unsqueeze_", "squeeze_", "as_strided_", "t_", "transpose_", "swapdims_", "swapaxes_",
    "resize_", "resize_as_", "set_", "detach_",
}  # fmt: skip


def _bind(op: str, args: list[Any], kwargs: dict[str, Any]) -> list[tuple[Any, Any, Any]]:
    """``[(schema_argument or None, name, value)]`` for every passed argument."""
    schema = None
    try:
        from opbench.spec.ops import get_overload

        schema = get_overload(op)._schema
    except Exception:  # noqa: BLE001 - unknown op: count every tensor as read
        schema = None
    out = []
    sargs = list(schema.arguments) if schema is not None else []
    for i, v in enumerate(args):
        a = sargs[i] if i < len(sargs) else None
        out.append((a, a.name if a is not None else f"arg{i}", v))
    by_name = {a.name: a for a in sargs}
    for k, v in kwargs.items():
        out.append((by_name.get(k), k, v))
    return out


def _out_numel(outputs: Any) -> int:
    return sum(t.numel() for t in tensors_in(outputs))


def _count_bytes(
    op: str, args: list[Any], kwargs: dict[str, Any], outputs: Any
) -> tuple[int, int, str]:
    family = base_name(op)
    bound = _bind(op, args, kwargs)
    not_read = _NOT_READ.get(family, set())
    gather_src = _GATHER_SOURCE.get(family)
    partial = family in _PARTIAL_INPLACE
    notes = []
    read_ts: list[torch.Tensor] = []
    written_args: list[torch.Tensor] = []  # tensors the schema says are written
    for a, name, v in bound:
        ts = tensors_in(v)
        if not ts:
            continue
        is_out = a is not None and getattr(a, "is_out", False)
        writes = a is not None and a.alias_info is not None and a.alias_info.is_write
        if writes:
            written_args.extend(ts)
        if is_out or name in not_read:
            continue
        if partial and name == "self":
            continue
        if gather_src is not None and name == gather_src:
            continue
        read_ts.extend(ts)
    read = unique_bytes(read_ts)
    out_ts = tensors_in(outputs)
    if gather_src is not None:
        gathered = sum(t.numel() * t.element_size() for t in out_ts if t.is_floating_point())
        read += gathered
        notes.append(f"{gather_src} counted as gathered bytes")
    if partial:
        notes.append("partial in-place write counted 0")
    input_keys = {_storage_key(t) for a, _n, v in bound for t in tensors_in(v)}
    written_keys = {_storage_key(t) for t in written_args}
    written: list[torch.Tensor] = []
    for t in out_ts:
        key = _storage_key(t)
        if key in input_keys:
            if key in written_keys and not partial:
                written.append(t)  # in-place / out=: really written
            continue  # a view of an input: nothing moves
        written.append(t)
    write = unique_bytes(written)
    if family in _METADATA_INPLACE or (
        out_ts and not written_args and all(_storage_key(t) in input_keys for t in out_ts)
    ):
        return 0, 0, "view of an input: no bytes move"
    return read, write, "; ".join(notes)


# --------------------------------------------------------------------------- flops

_ELEMENTWISE = {
    "add", "sub", "mul", "div", "rsub", "neg", "abs", "exp", "log", "log2", "sqrt", "rsqrt",
    "reciprocal", "sin", "cos", "tanh", "sigmoid", "relu", "gelu", "silu", "erf", "pow",
    "clamp", "clamp_min", "clamp_max", "maximum", "minimum", "where", "threshold_backward",
    "gelu_backward", "sigmoid_backward", "tanh_backward", "silu_backward", "hardswish",
    "hardswish_backward", "hardsigmoid", "hardsigmoid_backward", "hardtanh",
    "hardtanh_backward", "leaky_relu", "leaky_relu_backward", "elu", "elu_backward",
    "floor", "round", "sgn", "fmod", "remainder", "floor_divide", "addcmul", "addcdiv",
    "lt", "le", "gt", "ge", "eq", "ne", "isnan", "isinf", "masked_fill", "mse_loss_backward",
    "lerp",
}  # fmt: skip
_REDUCTIONS = {
    "sum", "mean", "amax", "amin", "max", "min", "prod", "var", "std", "var_mean",
    "std_mean", "norm", "argmax", "argmin", "logsumexp", "all", "any", "cumsum", "cumprod",
    "mse_loss", "nll_loss_forward",
}  # fmt: skip
_NORMS_FWD = {"native_layer_norm", "native_batch_norm", "native_group_norm", "layer_norm",
              "batch_norm", "group_norm", "_native_batch_norm_legit"}  # fmt: skip
_NORMS_BWD = {"native_layer_norm_backward", "native_batch_norm_backward",
              "native_group_norm_backward"}  # fmt: skip
_SOFTMAX_FWD = {"_softmax", "_log_softmax", "softmax", "log_softmax"}
_SOFTMAX_BWD = {"_softmax_backward_data", "_log_softmax_backward_data"}


# Operand names and positions of the matmul family with a bias / accumulator argument.
_MATMUL_OPERANDS: dict[str, tuple[str, int, str, int]] = {
    "addmm": ("mat1", 1, "mat2", 2),
    "baddbmm": ("batch1", 1, "batch2", 2),
    "addbmm": ("batch1", 1, "batch2", 2),
    "addmv": ("mat", 1, "vec", 2),
}


def _t(v: Any) -> torch.Tensor | None:
    return v if isinstance(v, torch.Tensor) else None


def _arg(bound: list[tuple[Any, Any, Any]], name: str, index: int) -> Any:
    for _a, n, v in bound:
        if n == name:
            return v
    return bound[index][2] if index < len(bound) else None


def _conv_fwd_flops(
    inp: torch.Tensor, weight: torch.Tensor, out_like: torch.Tensor, transposed: bool
) -> int:
    kvol = math.prod(weight.shape[2:]) if weight.dim() > 2 else 1
    base = inp.numel() if transposed else out_like.numel()
    return 2 * base * weight.shape[1] * kvol


def _count_flops(op: str, args: list[Any], kwargs: dict[str, Any], outputs: Any) -> tuple[int, str]:
    family = base_name(op)
    if family.endswith("_") and not family.startswith("_"):
        family = family[:-1]
    bound = _bind(op, args, kwargs)
    outs = tensors_in(outputs)
    first_out = outs[0] if outs else None
    ins = [t for _a, _n, v in bound for t in tensors_in(v)]
    x = ins[0] if ins else None

    if family in (
        "mm",
        "bmm",
        "matmul",
        "addmm",
        "baddbmm",
        "addbmm",
        "mv",
        "addmv",
        "dot",
        "linear",
    ):
        if family == "linear":
            a, b = _arg(bound, "input", 0), _arg(bound, "bias", 2)
            k = a.shape[-1]
            n_out = first_out.numel() if first_out is not None else 0
            extra = n_out if isinstance(b, torch.Tensor) else 0
            return 2 * n_out * k + extra, "2*out*K (+out for bias)"
        names = _MATMUL_OPERANDS.get(family)
        if names is not None:
            a, b = _t(_arg(bound, names[0], names[1])), _t(_arg(bound, names[2], names[3]))
        else:
            a, b = (ins[0], ins[1]) if len(ins) >= 2 else (None, None)
        if a is None or b is None:
            return 0, "bytes only (matmul operands missing)"
        k = a.shape[-1] if a.dim() >= 1 else 1
        if family == "dot":
            return 2 * k, "2*K"
        if family == "addbmm":
            m, n = a.shape[-2], b.shape[-1]
            return 2 * a.shape[0] * m * n * k + m * n, "2*B*M*N*K + M*N"
        n_out = first_out.numel() if first_out is not None else 0
        flops = 2 * n_out * k
        if family in ("addmm", "baddbmm", "addmv"):
            return flops + n_out, "2*M*N*K + M*N"
        return flops, "2*M*N*K (batched: times B)"

    if family in ("convolution", "_convolution", "conv2d", "conv1d", "conv3d", "cudnn_convolution"):
        inp, weight = _t(_arg(bound, "input", 0)), _t(_arg(bound, "weight", 1))
        transposed = (
            bool(_arg(bound, "transposed", 6))
            if family in ("convolution", "_convolution")
            else False
        )
        if inp is None or weight is None or first_out is None:
            return 0, "bytes only"
        flops = _conv_fwd_flops(inp, weight, first_out, transposed)
        bias = _t(_arg(bound, "bias", 2))
        if bias is not None:
            flops += first_out.numel()
        return flops, "2*out*C_in/groups*kernel_volume (+out for bias)"

    if family == "convolution_backward":
        go, inp, weight = (
            _t(_arg(bound, n, i)) for n, i in (("grad_output", 0), ("input", 1), ("weight", 2))
        )
        transposed = bool(_arg(bound, "transposed", 7))
        mask = _arg(bound, "output_mask", 10) or [True, True, True]
        if go is None or inp is None or weight is None:
            return 0, "bytes only"
        fwd = _conv_fwd_flops(inp, weight, go, transposed)
        flops = fwd * (int(bool(mask[0])) + int(bool(mask[1]))) + (go.numel() if mask[2] else 0)
        return flops, "forward-equivalent flops per requested grad (input, weight) + bias sum"

    if family in _NORMS_FWD and x is not None:
        return 5 * x.numel(), "~5 per input element"
    if family in _NORMS_BWD and x is not None:
        return 8 * x.numel(), "~8 per input element"
    if family in _SOFTMAX_FWD and x is not None:
        return 5 * x.numel(), "~5 per element (max, sub, exp, sum, div)"
    if family in _SOFTMAX_BWD and x is not None:
        return 3 * x.numel(), "~3 per element"
    if family in _REDUCTIONS and x is not None:
        return x.numel(), "1 per input element"
    if family in _ELEMENTWISE and first_out is not None:
        return first_out.numel(), "1 per output element"
    return 0, "bytes only"


def work_of(
    op: str, args: list[Any] | tuple[Any, ...], kwargs: dict[str, Any], outputs: Any
) -> Work:
    """Bytes and FLOPs one call of ``op`` (``add.Tensor``, no ``aten.``) must do.

    ``args``/``kwargs`` are the call's inputs as passed, ``outputs`` what it returned.
    Call it on inputs before an in-place op ran or after: layouts are what count.
    """
    args = list(args)
    read, write, byte_note = _count_bytes(op, args, kwargs, outputs)
    flops, flop_note = _count_flops(op, args, kwargs, outputs)
    formula = f"bytes: unique storage read {read} + written {write}"
    if byte_note:
        formula += f" ({byte_note})"
    formula += f"; flops: {flop_note}"
    return Work(
        bytes=read + write, flops=int(flops), formula=formula, read_bytes=read, write_bytes=write
    )
