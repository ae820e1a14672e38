"""Verdicts from what the worker saw outside a trial: at import, and while timing.

Runs in the HARNESS. A worker imports its unit's code under the call observer, with
the process fingerprinted just before (:mod:`opbench.instrument.integrity`); it times
a candidate under the observer too. These functions turn those raw records into
verdicts: ``tampering`` for a process that changed, ``calls_pytorch`` for compute
delegated to PyTorch on another thread at import or inside the timed calls.
"""

from __future__ import annotations

from typing import Any

from opbench.judge import guard as guard_mod
from opbench.judge.evaluate import Verdict
from opbench.judge.neighbour_verdict import neighbour_lines

__all__ = ["import_verdict", "timing_guard_verdict"]


def import_verdict(op: str, unit_info: dict[str, Any] | None, options: Any) -> Verdict | None:
    """A failing verdict for every test of a unit whose import tampered with the worker
    or started PyTorch compute on another thread; None when the import was clean.

    Compute on the worker's own thread at import (a lookup table built with torch) is
    not delegation of a test's work; it is noted in the details of the tests instead.
    """
    if not unit_info:
        return None
    tamper = list(unit_info.get("import_tamper") or [])
    tamper += neighbour_lines(
        None,
        allow_threads=bool(getattr(options, "allow_threads", False)),
        newcomers=list(unit_info.get("import_neighbours") or []),
    )
    observed = unit_info.get("import_observed") or {}
    _, silenced = guard_mod.classify_trial(op, [], observed)
    if tamper or silenced:
        lines = tamper + silenced
        return Verdict(
            "failed",
            "tampering",
            f"importing the kernel changed the judge's process: {'; '.join(lines[:5])}",
            details={"tampering": lines, "when": "import"},
        )
    other = guard_mod.classify_calls(
        op, [(n, False) for n, k in (observed.get("other_threads") or {}).items() for _ in range(k)]
    )
    if not other.ok and not getattr(options, "allow_pytorch", False):
        return Verdict(
            "failed",
            "calls_pytorch",
            "a thread started when the kernel was imported called PyTorch compute ops: "
            + ", ".join(sorted(other.violations)),
            details={"calls": other.violations, "when": "import"},
        )
    return None


def timing_guard_verdict(op: str, message: dict[str, Any], options: Any) -> Verdict | None:
    """The verdict on what the candidate did while timed (None when it was not timed).

    ``timing_tamper``: the process changed before or during timing (the pair is not
    timed, or its times are void); ``timing_observed``: the calls the observer saw in
    the observed stretches of timing (the first calls, the mutation probe, and on CUDA
    the warm-up and device-time batches).
    """
    tamper = list(message.get("timing_tamper") or [])
    if tamper:
        return Verdict(
            "failed",
            "tampering",
            f"the process changed around the timed calls: {'; '.join(tamper[:5])}",
            details={"tampering": tamper, "when": "timing"},
        )
    observed = message.get("timing_observed")
    if observed is None:
        return None
    g = guard_mod.classify_timed(op, observed)
    if g.ok:
        return Verdict("passed", None, "")
    msg = "while being timed, " + g.message().removeprefix("the ")
    if getattr(options, "allow_pytorch", False):
        return Verdict("passed", None, "", details={"timed_calls_pytorch": g.violations})
    return Verdict(
        "failed", "calls_pytorch", msg, details={"calls": g.violations, "when": "timing"}
    )
