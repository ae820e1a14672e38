"""Argument trees: the nested lists, tuples and dicts of an ATen call's or a program's
arguments, walked one way everywhere (the harness, the worker and the program runner
each walked them with a copy of the same recursion)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

__all__ = ["map_tensors", "tensors_in"]


def map_tensors(obj: Any, fn: Callable[[torch.Tensor], Any]) -> Any:
    """``obj`` with every tensor ``t`` replaced by ``fn(t)``, through lists, tuples and
    dict values (new containers of the same types); other leaves unchanged."""
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, list):
        return [map_tensors(v, fn) for v in obj]
    if isinstance(obj, tuple):
        return tuple(map_tensors(v, fn) for v in obj)
    if isinstance(obj, dict):
        return {k: map_tensors(v, fn) for k, v in obj.items()}
    return obj


def tensors_in(obj: Any) -> list[torch.Tensor]:
    """Every tensor in an argument tree (lists, tuples, dict values), in order."""
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [t for v in obj for t in tensors_in(v)]
    if isinstance(obj, dict):
        return [t for v in obj.values() for t in tensors_in(v)]
    return []
