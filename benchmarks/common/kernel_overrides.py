"""``--set MODULE.NAME=VALUE`` for the GPU benchmark scripts: a tuning constant of one of
the Triton backend's modules (``opbench.kernels._lib.MODULE``) set for the run without
editing the source, so one device call can time several variants. No heavy imports: a
script run under Triton's interpreter must set ``TRITON_INTERPRET`` before Triton loads."""

from __future__ import annotations

import ast
import contextlib
import importlib
from collections.abc import Iterable, Iterator
from typing import Any


def apply_overrides(settings: list[str]) -> dict[str, Any]:
    """Set ``opbench.kernels._lib.MODULE.NAME = VALUE`` (a Python literal) for each
    ``MODULE.NAME=VALUE``; returns what was set. An unknown name ends the run."""
    done: dict[str, Any] = {}
    for item in settings:
        target, _, value = item.partition("=")
        module, _, name = target.rpartition(".")
        mod = importlib.import_module(f"opbench.kernels._lib.{module}")
        if not hasattr(mod, name):
            raise SystemExit(f"--set {item}: {module} has no {name}")
        setattr(mod, name, ast.literal_eval(value))
        done[target] = getattr(mod, name)
    return done


@contextlib.contextmanager
def overridden(settings: list[str], plans: Iterable[dict] = ()) -> Iterator[dict[str, Any]]:
    """``MODULE.NAME=VALUE`` settings inside the block only (yields what was set), the
    values before restored after. ``plans``: the caches of plans the settings shape,
    emptied on the way in and out: a plan kept from other settings would serve the block,
    and the block's plans the calls after it."""
    plans = list(plans)
    saved = []
    for item in settings:
        module, _, name = item.partition("=")[0].rpartition(".")
        mod = importlib.import_module(f"opbench.kernels._lib.{module}")
        if hasattr(mod, name):  # apply_overrides ends the run on a name that is not
            saved.append((mod, name, getattr(mod, name)))
    for cache in plans:
        cache.clear()
    try:
        yield apply_overrides(settings)
    finally:
        for mod, name, value in saved:
            setattr(mod, name, value)
        for cache in plans:
            cache.clear()
