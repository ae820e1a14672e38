"""Which tensors of an ATen call are inputs, which the op may write, and which it must
return (``self`` of an in-place overload, the ``out`` tensors of an ``out=`` one).

Pure functions of the operator schema and the call's arguments, used alike by the
worker (to record) and the judge (to decide).
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = [
    "UNINITIALIZED_OPS",
    "WRITES_NOT_IN_SCHEMA",
    "arg_names",
    "is_written",
    "op_name",
    "targets",
    "variant_kind",
    "walk_inputs",
    "written_args",
]

#: Ops whose outputs are uninitialised memory: only shape, dtype and device are judged
#: (and the suites leave them out where that is all a test could show).
UNINITIALIZED_OPS: frozenset[str] = frozenset(
    """
    empty empty_like empty_strided new_empty new_empty_strided empty_permuted resize_
    resize_as_ _resize_output_ _empty_affine_quantized _empty_per_channel_affine_quantized
    """.split()
)

#: Arguments ops write although their schema does not say so (running statistics).
WRITES_NOT_IN_SCHEMA: dict[str, frozenset[str]] = {
    "native_batch_norm": frozenset({"running_mean", "running_var"}),
    "cudnn_batch_norm": frozenset({"running_mean", "running_var"}),
    "miopen_batch_norm": frozenset({"running_mean", "running_var"}),
}


def walk_inputs(args: list[Any], kwargs: dict[str, Any]) -> list[tuple[str, str, torch.Tensor]]:
    """``[(path, argument name or index, tensor)]`` for every tensor in the call."""
    out: list[tuple[str, str, torch.Tensor]] = []

    def rec(v: Any, path: str, top: str) -> None:
        if isinstance(v, torch.Tensor):
            out.append((path, top, v))
        elif isinstance(v, (list, tuple)):
            for i, x in enumerate(v):
                rec(x, f"{path}[{i}]", top)

    for i, a in enumerate(args):
        rec(a, f"args[{i}]", str(i))
    for k, a in kwargs.items():
        rec(a, f"kwargs[{k!r}]", k)
    return out


def arg_names(overload: torch._ops.OpOverload) -> list[str]:
    return [a.name for a in overload._schema.arguments]


def written_args(overload: torch._ops.OpOverload) -> set[str]:
    """Schema names and positions of the arguments the op may write (``Tensor(a!)``, and
    :data:`WRITES_NOT_IN_SCHEMA`)."""
    out: set[str] = set()
    extra = WRITES_NOT_IN_SCHEMA.get(overload._schema.name.removeprefix("aten::"), frozenset())
    for i, a in enumerate(overload._schema.arguments):
        if (a.alias_info is not None and a.alias_info.is_write) or a.name in extra:
            out.add(a.name)
            out.add(str(i))
    return out


def is_written(top: str, overload: torch._ops.OpOverload, written: set[str]) -> bool:
    """Whether the argument at ``top`` (a position or a keyword name) may be written."""
    if top in written:
        return True
    names = arg_names(overload)
    return top.isdigit() and int(top) < len(names) and names[int(top)] in written


def op_name(overload: torch._ops.OpOverload) -> str:
    """``add.Tensor`` for ``torch.ops.aten.add.Tensor``."""
    return f"{overload._schema.name.removeprefix('aten::')}.{overload._overloadname}"


def variant_kind(overload: torch._ops.OpOverload) -> str:
    """``functional``, ``inplace``, ``out`` or ``other`` (from the schema)."""
    from opbench.spec.variants import kind_of

    try:
        return kind_of(op_name(overload))
    except (AttributeError, RuntimeError, ValueError):
        return "other"


def targets(overload: torch._ops.OpOverload, args: list[Any], kwargs: dict[str, Any]) -> list[Any]:
    """The tensors an in-place / ``out=`` overload must write and return, in order."""
    kind = variant_kind(overload)
    names = arg_names(overload)
    if kind == "inplace":
        return [args[0] if args else kwargs.get(names[0])]
    if kind == "out":
        from opbench.spec.variants import out_arg_names

        outs = []
        for n in out_arg_names(op_name(overload)):
            if n in kwargs:
                outs.append(kwargs[n])
            elif n in names and names.index(n) < len(args):
                outs.append(args[names.index(n)])
            else:
                outs.append(None)
        return outs
    return []
