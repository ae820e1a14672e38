"""The Python API for using a backend in this process (DESIGN.md: ``opbench.enable``,
``opbench.disable``, ``opbench.backend``): a spec (``aten``, ``triton``, a kernel
directory, ``module:NAME``) or a loaded :class:`~opbench.backends.base.Backend`.

A spec is loaded by :func:`~opbench.backends.loader.load_backend` and the result
registered by :mod:`opbench.backends.registry`. The two steps live apart from the
registry so that imports run one way: loading a ``module:`` backend reaches into the
registry (:mod:`opbench.backends.module` takes out what a package registered), so the
registry cannot import the loader.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from pathlib import Path

from opbench.backends import registry
from opbench.backends.base import Backend
from opbench.backends.loader import load_backend
from opbench.backends.registry import disable
from opbench.backends.serve_policy import ServePolicy, policy_from_run

__all__ = ["backend", "disable", "enable"]


def enable(
    backend_or_path: Backend | str | Path,
    device: str | None = None,
    *,
    kernel_version: str | None = None,
    ops: Iterable[str] | None = None,
    policy: ServePolicy | str | Path | None = None,
    native: bool = True,
) -> Backend:
    """Register a backend's kernels into PyTorch; returns the loaded :class:`Backend`.

    ``backend_or_path``: a Backend, a kernel directory, ``module:NAME`` or ``aten``.
    ``device``: ``cpu`` or ``cuda`` (default: cuda when available). ``ops`` limits the
    registration to these overloads (the ``aten`` backend registers only those given).
    ``policy``: serve only where a judged run found the kernels faster than eager: a
    :class:`~opbench.backends.serve_policy.ServePolicy`, a ``serve_policy.json``, or a
    run directory (its results, host-inclusive speedups). ``native``: the C++ gate in
    front of the ops where it pays (:mod:`opbench.backends.native`: launches from C++ on
    CUDA, policy decisions without Python); False keeps the Python path alone.
    Example: ``opbench.enable("my_kernels/", device="cuda", policy="runs/judged")``.
    """
    device = device or registry.default_device()
    if isinstance(backend_or_path, Backend):
        be = backend_or_path
    else:
        be = load_backend(str(backend_or_path), device, kernel_version=kernel_version)
    return registry.enable(be, device, ops=ops, policy=as_policy(policy), native=native)


def as_policy(policy: ServePolicy | str | Path | None, measure: str = "host") -> ServePolicy | None:
    """A policy from a policy, a ``serve_policy.json`` file, or a run directory (its
    ``measure`` speedups: ``host``, what an eager-mode model pays, or ``device``, what a
    step captured whole as a CUDA graph pays)."""
    if policy is None or isinstance(policy, ServePolicy):
        return policy
    path = Path(policy)
    if path.is_dir() and (path / "results.sqlite").exists():
        return policy_from_run(path, measure=measure)
    return ServePolicy.load(path)


# enable's parameters again, kept apart: the context-manager form of the same call, and
# its signature is what users read in their editor.
@contextlib.contextmanager
def backend(
    backend_or_path: Backend | str | Path,
    device: str | None = None,
    *,
    kernel_version: str | None = None,
    ops: Iterable[str] | None = None,
    policy: ServePolicy | str | Path | None = None,
    native: bool = True,
) -> Iterator[Backend]:
    """``with opbench.backend("my_kernels/", device="cpu"): model(x)``; removed on exit."""
    be = enable(
        backend_or_path, device, kernel_version=kernel_version, ops=ops, policy=policy,
        native=native,
    )  # fmt: skip
    try:
        yield be
    finally:
        disable(be)
