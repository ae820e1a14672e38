"""ATen overload names: resolving, selecting with ``--ops``, and kernel folder names.

Names are written without the ``aten.`` prefix internally (``add.Tensor``,
``relu.default``); a bare ``aten::relu`` registration is the ``default`` overload.
Everything here is driven by PyTorch's own operator registry, not hand-written
tables, so it follows whatever torch version runs.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Iterable

import torch

__all__ = [
    "OVERLOAD_ALIASES",
    "UnknownOpError",
    "all_overload_names",
    "canonical_name",
    "get_overload",
    "overload_exists",
    "overloads_by_op",
    "select_ops",
    "folder_name",
    "parse_folder_name",
    "base_name",
]

#: Overloads seen in traces that no longer exist, mapped to their current equivalent.
OVERLOAD_ALIASES: dict[str, str] = {
    "sum.SymInt": "sum.dim_IntList",
}


class UnknownOpError(ValueError):
    """An operator name that matches no ATen overload; carries close suggestions."""

    def __init__(self, name: str, suggestions: list[str]) -> None:
        self.name = name
        self.suggestions = suggestions
        hint = f" Did you mean: {', '.join(suggestions)}?" if suggestions else ""
        super().__init__(f"unknown operator {name!r}.{hint}")


def canonical_name(name: str) -> str:
    """``aten.add.Tensor`` / ``aten::add.Tensor`` / ``add.Tensor`` -> ``add.Tensor``.

    A name without an overload stays bare (``relu``): it means the whole op.
    """
    name = name.strip()
    for prefix in ("aten::", "aten."):
        if name.startswith(prefix):
            name = name[len(prefix) :]
    return name


@functools.lru_cache(maxsize=1)
def all_overload_names() -> frozenset[str]:
    """Every ATen overload registered in this torch, as ``op.overload``."""
    out = set()
    for full in torch._C._dispatch_get_all_op_names():
        if not full.startswith("aten::"):
            continue
        name = full[len("aten::") :]
        out.add(name if "." in name else f"{name}.default")
    return frozenset(out)


@functools.lru_cache(maxsize=1)
def overloads_by_op() -> dict[str, tuple[str, ...]]:
    """Every overload of this torch grouped by its op (``add`` -> ``add.Scalar``,
    ``add.Tensor``, ...; in-place ``add_`` is an op of its own), sorted; built once per
    process (a worker builds it in its warm-up, so forks of the template share it)."""
    by_op: dict[str, list[str]] = {}
    for name in all_overload_names():
        by_op.setdefault(base_name(name), []).append(name)
    return {k: tuple(sorted(v)) for k, v in by_op.items()}


def base_name(overload: str) -> str:
    """``add.Tensor`` -> ``add``; ``add_.Tensor`` -> ``add_``."""
    return canonical_name(overload).split(".", 1)[0]


def overload_exists(name: str) -> bool:
    return canonical_name(name) in all_overload_names()


def get_overload(name: str) -> torch._ops.OpOverload:
    """The :class:`torch._ops.OpOverload` for ``add.Tensor`` (aliases applied)."""
    name = canonical_name(name)
    name = OVERLOAD_ALIASES.get(name, name)
    op, _, overload = name.partition(".")
    packet = getattr(torch.ops.aten, op)
    return getattr(packet, overload or "default")


def select_ops(
    requested: Iterable[str], available: Iterable[str]
) -> tuple[set[str], dict[str, str]]:
    """Match ``--ops`` entries against the overloads a suite has.

    Each entry is an exact overload (``add.Tensor``) or a bare op (``add``: every
    overload of ``add``, never ``add_`` or ``addmm``). Returns the selected overloads and,
    for requested names the suite lacks but PyTorch knows, the reason they are not tested.
    Raises :class:`UnknownOpError` for a name PyTorch does not know at all.
    """
    available = set(available)
    by_base: dict[str, set[str]] = {}
    for name in available:
        by_base.setdefault(base_name(name), set()).add(name)
    selected: set[str] = set()
    not_in_suite: dict[str, str] = {}
    for raw in requested:
        name = canonical_name(raw)
        if not name:
            continue
        if "." in name:
            if name in available:
                selected.add(name)
            elif name in all_overload_names() or name in OVERLOAD_ALIASES:
                not_in_suite[name] = "no test of this overload in the suite"
            else:
                raise UnknownOpError(raw, suggest(name))
        else:
            if name in by_base:
                selected |= by_base[name]
            elif name in overloads_by_op():
                not_in_suite[name] = "no test of this operator in the suite"
            else:
                raise UnknownOpError(raw, suggest(name))
    return selected, not_in_suite


def suggest(name: str, n: int = 5) -> list[str]:
    """Close ATen names for an unknown one, for error messages."""
    pool = sorted(set(overloads_by_op()) | all_overload_names())
    return difflib.get_close_matches(canonical_name(name), pool, n=n, cutoff=0.6)


def folder_name(overload: str) -> str:
    """Kernel folder for an overload: ``add.Tensor`` -> ``add__Tensor`` (BackendBench layout)."""
    return canonical_name(overload).replace(".", "__")


def parse_folder_name(folder: str) -> str:
    """Inverse of :func:`folder_name`; a bare op folder (``relu``) stays bare.

    Raises :class:`UnknownOpError` when the folder names no ATen op or overload.
    """
    ops = overloads_by_op()
    if folder in ops:
        return folder
    if "__" in folder:
        op, overload = folder.rsplit("__", 1)
        name = f"{op}.{overload}"
        if name in all_overload_names():
            return name
    raise UnknownOpError(folder.replace("__", "."), suggest(folder.replace("__", ".")))
