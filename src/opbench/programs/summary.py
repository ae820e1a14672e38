"""The scores of a program run (pure functions over stored results, no I/O).

One problem is one test. The denominator is the set of problems that ran here: a
problem that is *not runnable* on this machine (hub weights, a missing package, too
large for the memory cap) is listed under ``not_runnable`` with its reason and left
out, like an operator without an included test; a problem whose candidate is missing,
crashed, hung or cheated stays in as not correct. A *weak* problem (a trivial answer
would pass it too, so a passing candidate proves nothing) is listed under ``weak`` and
left out as well.

* ``correctness_score``: correct problems / denominator.
* ``fast_p`` (KernelBench's fast_p, against eager timed live): the fraction of the
  denominator that is correct *and* whose device-time speedup over eager exceeds ``p``.
* ``fast_p_compile``: the same against ``torch.compile`` (``--compile-baseline``).
* ``performance_score``: the geomean of the correct problems' speedups over eager.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from opbench.report import metrics
from opbench.run.store import TestResult

__all__ = ["FAST_P", "fast_p", "problem_summaries", "program_scores"]

#: The thresholds the brief of a program run reports (a subset of the operator run's).
FAST_P: tuple[float, ...] = (0.0, 1.0, 1.5, 2.0)


def _key(p: float) -> str:
    return "0" if p == 0 else f"{p:.1f}"


def fast_p(
    correct: dict[str, bool], speedups: dict[str, float | None], denominator: int
) -> dict[str, float | None]:
    """``{"0": .., "1.0": .., ...}``: correct and faster than ``p`` over the denominator;
    None where nothing was timed (``--no-perf``) or nothing ran."""
    out: dict[str, float | None] = {}
    timed = {k: s for k, s in speedups.items() if s is not None and correct.get(k)}
    for p in FAST_P:
        if denominator == 0:
            out[_key(p)] = None
        elif p == 0:
            out[_key(p)] = sum(1 for v in correct.values() if v) / denominator
        elif not timed:
            out[_key(p)] = None
        else:
            out[_key(p)] = sum(1 for s in timed.values() if s > p) / denominator
    return out


def problem_summaries(results: Iterable[TestResult]) -> dict[str, dict[str, Any]]:
    """One record per problem: its verdict, times and speedups (eager and compile)."""
    out: dict[str, dict[str, Any]] = {}
    for r in sorted(results, key=lambda r: r.test_id):
        comp = (r.details or {}).get("compile") or {}
        case = r.case_json or {}
        rec: dict[str, Any] = {
            "level": case.get("level", ""),
            "status": r.status,
            "category": r.category,
            "correct": r.status == "passed",
            "speedup": r.speedup,
            "speedup_host": r.speedup_host,
            "eager_ms": r.ref_device_ms,
            "candidate_ms": r.cand_device_ms,
            "speedup_compile": comp.get("speedup"),
            "compile_ms": comp.get("compile_device_ms"),
            "max_abs_err": r.max_abs_err,
            "message": (r.message or "").splitlines()[0][:300] if r.message else "",
        }
        if comp.get("error"):
            rec["compile_error"] = str(comp["error"])[:300]
        if (r.details or {}).get("work"):
            rec["work"] = r.details["work"]
        out[r.test_id] = rec
    return out


def program_scores(results: list[TestResult], *, compile_baseline: bool) -> dict[str, Any]:
    """The score fields of ``summary.json`` for a program run (see the module doc)."""
    ops = metrics.op_summaries(results)
    not_runnable = {
        r.test_id: r.message or "not runnable here" for r in results if r.status == "skipped"
    }
    weak = {
        op: next((r.message for r in results if r.op == op and r.weak), "only weak tests")
        for op, v in ops.items()
        if v.get("tests") and v.get("note", "").startswith("only weak tests")
    }
    denominator = sorted(op for op, v in ops.items() if v.get("tests") and op not in weak)
    scores = metrics.scores(ops, denominator)
    correct = {op: bool(ops[op].get("correct")) for op in denominator}
    scores["fast_p"] = fast_p(
        correct, {op: ops[op].get("speedup") for op in denominator}, len(denominator)
    )
    if compile_baseline:
        by_id = {r.test_id: r for r in results}
        comp = {
            op: ((by_id[op].details or {}).get("compile") or {}).get("speedup")
            for op in denominator
            if op in by_id
        }
        scores["fast_p_compile"] = fast_p(correct, comp, len(denominator))
        timed = [s for op, s in comp.items() if s is not None and correct.get(op)]
        scores["performance_score_compile"] = metrics.geomean(timed)
    scores["problems_in_denominator"] = scores.get("ops_in_denominator")
    scores["problems_correct"] = scores.get("ops_correct")
    return {
        **scores,
        "ops": {op: v for op, v in ops.items() if op in set(denominator)},
        "not_runnable": dict(sorted(not_runnable.items())),
        "weak": dict(sorted(weak.items())),
    }
