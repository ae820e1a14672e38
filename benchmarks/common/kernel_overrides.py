"""``--set MODULE.NAME=VALUE`` for the GPU benchmark scripts: a tuning constant of one of
the Triton backend's modules (``opbench.kernels._lib.MODULE``) set for the run without
editing the source, so one device call can time several variants. No heavy imports: a
script run under Triton's interpreter must set ``TRITON_INTERPRET`` before Triton loads."""

from __future__ import annotations

import ast
import importlib
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
