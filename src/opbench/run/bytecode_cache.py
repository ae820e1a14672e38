"""Compiled bytecode for the harness's own processes where Python writes none.

Where ``PYTHONDONTWRITEBYTECODE`` is set, or the installed packages come without
``__pycache__`` and cannot take one, every Python process compiles what it imports from
source. On the lent 4 x H100 machine (2026-11-28) both held: importing PyTorch's OpInfo
database took 13.6-15.2 s in each fresh process, and a CUDA run's judging process and its
fork server's template each import it before the first test (the first result came about
13 s after the run's start, ``results/scaling-opinfo-h100x4-2026-11-28.md``).

:func:`use_bytecode_cache` points the harness, and the processes it starts, at a cache of
compiled bytecode under opbench's cache folder (``sys.pycache_prefix``): the first run
writes it, later runs read it. Workers read it but never write it (:func:`stop_writing`,
before any candidate code is imported).

Trust: a sandboxed worker sees that folder read-only (bubblewrap binds ``/`` read-only).
Without a sandbox a worker runs as the harness's user and could as well rewrite opbench's
own source files; the cache adds no way in that the source files do not already give.
``OPBENCH_BYTECODE_CACHE``: ``auto`` (the default: where :func:`needs_bytecode_cache`),
``off`` (Python's own behaviour), ``always`` (even where bytecode sits beside the sources,
which Python then no longer reads: ``benchmarks/probes/bytecode_start.py`` uses it to time
a machine without bytecode on one with it).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

__all__ = ["bytecode_cache_dir", "needs_bytecode_cache", "stop_writing", "use_bytecode_cache"]

#: Packages whose compiled bytecode decides the start-up: if the first has none beside
#: its source and cannot get one, the harness's processes compile from source.
_PROBE_PACKAGE = "torch"


def bytecode_cache_dir() -> Path:
    """``<opbench cache>/bytecode``: one tree for every Python version (the files carry
    the interpreter's tag, ``cpython-312``)."""
    from opbench.cache import cache_dir

    return cache_dir() / "bytecode"


def needs_bytecode_cache(package: str = _PROBE_PACKAGE) -> bool:
    """Whether this interpreter would compile ``package`` from source in every process:
    it has no bytecode beside its source, and Python writes none here
    (``PYTHONDONTWRITEBYTECODE``) or its folder cannot take any. False where someone
    chose where bytecode goes (``PYTHONPYCACHEPREFIX``), where the package's bytecode is
    there (Python reads it even when told to write none), or where it is missing."""
    if sys.pycache_prefix is not None:
        return False
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return False
    compiled = Path(importlib.util.cache_from_source(spec.origin))
    if compiled.exists():
        return False
    if sys.dont_write_bytecode:
        return True
    folder = compiled.parent if compiled.parent.exists() else compiled.parent.parent
    return not os.access(folder, os.W_OK)


def use_bytecode_cache(package: str = _PROBE_PACKAGE) -> Path | None:
    """At the harness's start, before its heavy imports: read and write compiled bytecode
    under :func:`bytecode_cache_dir` where :func:`needs_bytecode_cache` (of ``package``,
    PyTorch: the bulk of every start), in this process
    and (through the environment) in the processes it starts. Returns the folder, or None
    where nothing changed (not needed, ``OPBENCH_BYTECODE_CACHE=off``, or the folder
    cannot be made); a setting it does not know is a ``ValueError``."""
    setting = os.environ.get("OPBENCH_BYTECODE_CACHE", "auto").lower()
    if setting not in ("auto", "off", "always"):
        raise ValueError(
            f"OPBENCH_BYTECODE_CACHE must be 'auto', 'off' or 'always', not {setting!r}"
        )
    if setting == "off" or (setting == "auto" and not needs_bytecode_cache(package)):
        return None
    folder = bytecode_cache_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    if not os.access(folder, os.W_OK):
        return None
    sys.pycache_prefix = str(folder)
    sys.dont_write_bytecode = False
    os.environ["PYTHONPYCACHEPREFIX"] = str(folder)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    return folder


def stop_writing() -> None:
    """In a worker, before candidate code: read the harness's bytecode, write none (a
    candidate's own modules are compiled from source, and nothing it imports lands in
    the cache the harness reads)."""
    sys.dont_write_bytecode = True
