"""Building a program problem's inputs from a seed: the one recipe both sides follow.

The harness (for its references) and the worker (for the candidate) each build their
own inputs by calling the problem's ``get_inputs()`` after seeding every generator a
problem file may draw from; neither ever sees the other's tensors, so a candidate that
writes into its inputs cannot change what the reference saw. The worker reports a digest
of the inputs it built and the harness checks it against its own: a ``get_inputs`` that
does not follow its seed is caught, not silently compared on different data.
"""

from __future__ import annotations

import inspect
import random
import sys
from collections.abc import Callable
from typing import Any

import torch

from opbench.spec.trees import map_tensors, tensors_in

__all__ = ["build_model", "call_sized", "make_inputs", "seed_all", "tensors_of", "to_device"]


def call_sized(fn: Callable[..., Any], size: str | None) -> Any:
    """``fn(size)`` when ``fn`` takes a parameter, else ``fn()`` (KernelBench files)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return fn()
    takes = any(
        p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
        for p in params.values()
    )
    return fn(size) if takes and size is not None else fn()


def seed_all(seed: int) -> None:
    """Seed torch (CPU and every GPU), Python's ``random`` and numpy (when imported)."""
    torch.manual_seed(seed)
    random.seed(seed)
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed(seed % (1 << 32))


def to_device(obj: Any, device: str) -> Any:
    """Tensors moved to ``device`` in nested lists, tuples and dicts; others unchanged."""
    return map_tensors(obj, lambda t: t.to(device))


def tensors_of(obj: Any) -> list[torch.Tensor]:
    """Every tensor in a nested structure, in order."""
    return tensors_in(obj)


def make_inputs(module: Any, seed: int, size: str | None, device: str) -> list[Any]:
    """The problem's inputs for ``seed``, on ``device``, as a list of call arguments."""
    seed_all(seed)
    args = call_sized(module.get_inputs, size)
    return list(to_device(list(args), device))


def build_model(cls: Any, init: list[Any], seed: int, device: str) -> Any:
    """``cls(*init)`` built on the CPU after seeding (as KernelBench does), then moved."""
    seed_all(seed)
    return cls(*init).to(device)
