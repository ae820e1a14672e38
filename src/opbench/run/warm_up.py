"""What a judging process loads before its first test, by suite: named here so that the
judging template (:mod:`opbench.run.judge_preload`) and a spawned judging process
(:mod:`opbench.run.slot_judge`) load the same."""

from __future__ import annotations

import importlib

__all__ = ["WARM_BY_SUITE", "warm_up"]

#: What a suite's judging processes load before their first test, as ``module`` or
#: ``module:function`` (called): the OpInfo suite's first plan imported PyTorch's OpInfo
#: database (``opinfos_by_key``: about 1,200 modules, 3.4 s of a first plan on the 2-core
#: CPU, 2026-11-28; importing ``opinfo_samples`` alone, what a judging process preloaded
#: before, defers all of it to the first plan).
WARM_BY_SUITE: dict[str, tuple[str, ...]] = {
    "opinfo": ("opbench.suites.opinfo_samples:opinfos_by_key",)
}


def warm_up(names: tuple[str, ...] | list[str]) -> None:
    """Import each ``module`` and call each ``module:function`` of ``names``
    (:data:`WARM_BY_SUITE`'s entries)."""
    for name in names:
        module, _, function = name.partition(":")
        loaded = importlib.import_module(module)
        if function:
            getattr(loaded, function)()
