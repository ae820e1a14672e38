"""What a judging process loads before its first test, by suite: named here so that the
judging template (:mod:`opbench.run.judge_preload`) and a spawned judging process
(:mod:`opbench.run.slot_judge`) load the same."""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Iterator

__all__ = ["WARM_BY_SUITE", "numba_hidden", "opinfo_database", "warm_up"]

#: What a suite's judging processes load before their first test, as ``module`` or
#: ``module:function`` (called): the OpInfo suite's first plan imported PyTorch's OpInfo
#: database (``opinfos_by_key``: about 1,200 modules, 3.4 s of a first plan on the 2-core
#: CPU, 2026-11-28; importing ``opinfo_samples`` alone, what a judging process preloaded
#: before, defers all of it to the first plan).
WARM_BY_SUITE: dict[str, tuple[str, ...]] = {"opinfo": ("opbench.run.warm_up:opinfo_database",)}


def warm_up(names: tuple[str, ...] | list[str]) -> None:
    """Import each ``module`` and call each ``module:function`` of ``names``
    (:data:`WARM_BY_SUITE`'s entries)."""
    for name in names:
        module, _, function = name.partition(":")
        loaded = importlib.import_module(module)
        if function:
            getattr(loaded, function)()


def opinfo_database() -> None:
    """PyTorch's OpInfo database, loaded as a template may load it: without numba
    (:func:`numba_hidden`; a fork of a judging template that imported it with numba died
    with SIGSEGV at its first CUDA call on 4 x H200, 2026-11-28, as the workers' had)."""
    from opbench.suites.opinfo_samples import opinfos_by_key

    with numba_hidden():
        opinfos_by_key()


@contextlib.contextmanager
def numba_hidden() -> Iterator[None]:
    """Import op_db as if numba were not installed.

    Where numba is installed, PyTorch's test helpers ask ``numba.cuda.is_available()``
    at import, which initialises the CUDA driver through numba's own bindings (torch
    never learns of it): every fork of a template that imported op_db then died with
    SIGSEGV at its first CUDA call (H100, 2026-11-27: a probe forked after each template
    step and only the op_db step spoiled the forks). A ``None`` in ``sys.modules`` makes
    ``find_spec`` say "not installed"; it is removed afterwards, so a kernel can still
    import numba itself."""
    had = "numba" in sys.modules
    if not had:
        sys.modules["numba"] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        if not had and sys.modules.get("numba", 0) is None:
            del sys.modules["numba"]
