"""Reading a run's recorded backend settings: whether two runs were measured the same
way (``opbench compare`` refuses to rank them otherwise), and the settings as rows for a
person (the report's table).

The settings themselves are pinned and read in the workers
(:mod:`opbench.instrument.settings`) and land in ``summary.json`` as
``env.backend_settings = {"start": {...}, "end": {...}}``.
"""

from __future__ import annotations

from typing import Any

from opbench.instrument.settings import PINNED_FP32

__all__ = ["RECORD_ONLY", "differences", "rows", "settings_of"]

#: Recorded for the reader; a difference here is what a before/after comparison of an
#: upgrade is for, not a reason to refuse it.
RECORD_ONLY = frozenset({"cuda.version", "cudnn.version"})
#: What opbench pins (the rest keeps PyTorch's defaults and is only recorded).
PINNED = frozenset({f"{p}.fp32_precision" for p in PINNED_FP32} | {"cudnn.benchmark"})


def settings_of(summary: dict[str, Any], when: str = "start") -> dict[str, Any] | None:
    found = (summary.get("env") or {}).get("backend_settings") or {}
    return found.get(when)


def differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Why runs ``a`` and ``b`` (summaries) cannot be ranked against each other: another
    device type or GPU model, or another value of a recorded backend setting (versions
    aside). Empty when they are comparable, or when either run predates the record."""
    out: list[str] = []
    da, db = str(a.get("device", "")).split(":")[0], str(b.get("device", "")).split(":")[0]
    if da != db:
        out.append(f"device: {da} vs {db}")
    ga, gb = (a.get("env") or {}).get("gpu"), (b.get("env") or {}).get("gpu")
    if ga != gb:
        out.append(f"GPU: {ga} vs {gb}")
    sa, sb = settings_of(a), settings_of(b)
    if sa is not None and sb is not None:
        for k in sorted((set(sa) | set(sb)) - RECORD_ONLY):
            if sa.get(k) != sb.get(k):
                out.append(f"{k}: {sa.get(k)!r} vs {sb.get(k)!r}")
    return out


def rows(summary: dict[str, Any]) -> list[tuple[str, Any, Any, bool]]:
    """``(setting, value at the start, value at the end, pinned by opbench)`` per setting,
    pinned ones first."""
    start = settings_of(summary, "start") or {}
    end = settings_of(summary, "end") or {}
    names = sorted(set(start) | set(end), key=lambda k: (k not in PINNED, k))
    return [(k, start.get(k), end.get(k), k in PINNED) for k in names]
