"""Real tensors from a parsed argument spec, reproducibly from a seed.

A trace line records shapes, dtypes and strides, never values. The values are ours to
choose, and bad choices make a test weak or meaningless: ``log`` of negative numbers is
all NaN, an ``embedding`` index out of range crashes, ``isnan`` of data without NaN is a
constant ``False``. So values come from a distribution with both signs and varied
magnitude (``normal * 2**uniform(-2, 2)``), and a small table of operator rules narrows
it where an operator's domain needs that (indices in range, positive inputs, saved
statistics consistent with the input). Where no rule can make valid inputs the case is
:class:`NotRunnable`, never silently wrong.

Reproducibility: every tensor is drawn on the CPU by its own ``torch.Generator`` seeded
from ``(seed, where the tensor sits in the call)``, then moved to the device, so the same
``(op, args, seed)`` gives bit-identical inputs in any process and on any device.

Strides are honoured exactly: each tensor owns a storage of exactly the elements its
shape and strides reach, viewed with ``as_strided`` (a stride-0 dimension is an expanded
tensor sharing its elements, not a dense copy). ``device="meta"`` builds the same
layouts without values (used by the suite's dry run) and applies the same checks.

This module owns the generic builder: binding a call to its schema, building each tensor
with its exact layout, moving it to the device, and the safety net that refuses an index
argument no rule covers. The shared vocabulary (:class:`~opbench.suites.input_call.Call`,
value kinds, draws) is :mod:`opbench.suites.input_call`'s; the operator rules are
:mod:`opbench.suites.input_rules` (values, saved state, the table) and
:mod:`opbench.suites.input_index_rules` (index arguments).
"""

from __future__ import annotations

from typing import Any

import torch

from opbench.spec.args import ParsedArgs, TensorSpec, TorchName
from opbench.spec.ops import OVERLOAD_ALIASES, base_name, canonical_name, get_overload
from opbench.suites.input_call import DEFAULT, Call, Kind, NotRunnable, Path, draw_seeded, mix_seed
from opbench.suites.input_rules import RULES

__all__ = ["NotRunnable", "copy_inputs", "make_inputs", "resolve_op_name"]


def _schema_names(overload: torch._ops.OpOverload) -> list[str]:
    return [a.name for a in overload._schema.arguments]


def resolve_op_name(op: str) -> str:
    """``aten.sum.SymInt`` -> ``sum.dim_IntList``: the runnable overload name."""
    name = canonical_name(op)
    return OVERLOAD_ALIASES.get(name, name)


# --------------------------------------------------------------------------- public entry


def make_inputs(
    op: str, parsed: ParsedArgs, device: str | torch.device, seed: int
) -> tuple[list[Any], dict[str, Any]]:
    """Real ``(args, kwargs)`` for ``op`` from ``parsed`` on ``device``, drawn from ``seed``.

    ``device="meta"`` builds the same layouts without values (for dry runs). Raises
    :class:`NotRunnable` when valid inputs cannot be generated.
    """
    name = resolve_op_name(op)
    device = torch.device(device)
    try:
        overload = get_overload(name)
    except AttributeError:
        raise NotRunnable(
            f"overload aten.{name} does not exist in torch {torch.__version__}"
        ) from None
    call = Call(op=name, parsed=parsed, schema_names=_schema_names(overload), seed=seed)
    call.meta = device.type == "meta"
    rule = RULES.get(_family(name))
    if rule is not None:
        rule(call)
    _safety_net(call, overload)
    call.args = [_build(v, ("args", i), call, device) for i, v in enumerate(parsed.args)]
    call.kwargs = {k: _build(v, ("kwargs", k), call, device) for k, v in parsed.kwargs.items()}
    _map_device_args(call, overload, device)
    if not call.meta:
        for derive in call.derives:
            derive(call)
    if device.type not in ("cpu", "meta"):
        memo: dict[tuple, torch.Tensor] = {}
        call.args = [_move(v, device, memo) for v in call.args]
        call.kwargs = {k: _move(v, device, memo) for k, v in call.kwargs.items()}
    return call.args, call.kwargs


def _family(name: str) -> str:
    """``add_.Tensor`` -> ``add``; ``index_put_.default`` -> ``index_put``; ``_index_put_impl_`` kept."""
    base = base_name(name)
    if base.endswith("_") and not base.startswith("_"):
        base = base[:-1]
    return base


# --------------------------------------------------------------------------- building


def _build(value: Any, path: Path, call: Call, device: torch.device) -> Any:
    if isinstance(value, TensorSpec):
        kind = call.kinds.get(path) or _default_kind(value.dtype)
        return _make_tensor(value, kind, mix_seed(call.seed, path), call.meta)
    if isinstance(value, tuple):
        return tuple(_build(v, path + (i,), call, device) for i, v in enumerate(value))
    if isinstance(value, list):
        return [_build(v, path + (i,), call, device) for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {k: _build(v, path + (k,), call, device) for k, v in value.items()}
    if isinstance(value, torch.device):
        return device
    if isinstance(value, TorchName):
        return value.resolve()
    return value


def _map_device_args(call: Call, overload: torch._ops.OpOverload, device: torch.device) -> None:
    """Device arguments recorded on the tracing machine ('cuda', "torch.device('cpu')") -> ours."""
    for a in overload._schema.arguments:
        if "Device" not in str(a.type):
            continue
        p = call.path(a.name)
        if p is None:
            continue
        v = call.kwargs[p[1]] if p[0] == "kwargs" else call.args[p[1]]
        if isinstance(v, (str, torch.device)):
            if p[0] == "kwargs":
                call.kwargs[p[1]] = device
            else:
                call.args[p[1]] = device


def _default_kind(dtype: torch.dtype) -> Kind:
    return DEFAULT


def _contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(strides))


def _storage_size(spec: TensorSpec) -> int:
    if spec.numel == 0:
        return 0
    stride = spec.stride if spec.stride is not None else _contiguous_strides(spec.shape)
    return 1 + sum((n - 1) * s for n, s in zip(spec.shape, stride))


def _make_tensor(spec: TensorSpec, kind: Kind, seed: int, meta: bool) -> torch.Tensor:
    """A CPU (or meta) tensor with ``spec``'s exact shape, dtype and strides."""
    stride = spec.stride if spec.stride is not None else _contiguous_strides(spec.shape)
    if any(s < 0 for s in stride):
        raise NotRunnable("negative strides cannot be built with as_strided")
    n = _storage_size(spec)
    if meta:
        buf = torch.empty(n, dtype=spec.dtype, device="meta")
    else:
        buf = draw_seeded(n, spec.dtype, kind, seed)
    return buf.as_strided(spec.shape, stride)


def _move(
    value: Any, device: torch.device | None, memo: dict[tuple, torch.Tensor], *, copy: bool = False
) -> Any:
    """Move to ``device`` (None: each tensor's own) keeping each tensor's storage, offset
    and strides: tensors that shared a storage share one on ``device`` too. ``copy``: a
    new storage even where the tensor is on ``device`` already."""
    if isinstance(value, torch.Tensor):
        if device is None:
            return _move(value, value.device, memo, copy=copy)
        nbytes = value.untyped_storage().nbytes()
        if nbytes == 0:
            return torch.empty_strided(
                value.shape, value.stride(), dtype=value.dtype, device=device
            )
        n = nbytes // value.element_size()
        key = (value.untyped_storage().data_ptr(), nbytes, value.dtype)
        if key not in memo:
            memo[key] = value.as_strided((n,), (1,), 0).to(device, copy=copy)
        return memo[key].as_strided(value.shape, value.stride(), value.storage_offset())
    if isinstance(value, tuple):
        return tuple(_move(v, device, memo, copy=copy) for v in value)
    if isinstance(value, list):
        return [_move(v, device, memo, copy=copy) for v in value]
    if isinstance(value, dict):
        return {k: _move(v, device, memo, copy=copy) for k, v in value.items()}
    return value


def copy_inputs(args: list[Any], kwargs: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """A copy of built inputs with the same values, strides, offsets and shared storages,
    on their own device: a second set of the same inputs for the price of a copy rather
    than of drawing them again (the harness runs eager and its float64 reference on the
    same inputs, and eager may write into its own)."""
    memo: dict[tuple, torch.Tensor] = {}
    return (
        [_move(v, None, memo, copy=True) for v in args],
        {k: _move(v, None, memo, copy=True) for k, v in kwargs.items()},
    )


# --------------------------------------------------------------------------- the safety net


#: Integer arguments that are indices or bookkeeping: random values would be invalid.
_INDEX_LIKE = {
    "index",
    "indices",
    "target",
    "offsets",
    "offset2bag",
    "bag_size",
    "max_indices",
    "maximum_indices",
    "lengths",
    "repeats",
    "sorted_sequence",
    "batch_sizes",
}


def _safety_net(call: Call, overload: torch._ops.OpOverload) -> None:
    """An integer index-like argument with no rule would get meaningless values: refuse."""
    if _family(call.op) in RULES:
        return
    for name in _INDEX_LIKE:
        spec = call.spec(name)
        specs = spec if isinstance(spec, (list, tuple)) else [spec]
        for s in specs:
            if (
                isinstance(s, TensorSpec)
                and not s.dtype.is_floating_point
                and s.dtype != torch.bool
            ):
                raise NotRunnable(f"no input rule for the index argument {name!r} of {call.op}")
