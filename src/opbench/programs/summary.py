"""The scores of a program run (pure functions over stored results, no I/O).

One problem is one test. The denominator is the set of problems that ran here: a
problem that is *not runnable* on this machine (hub weights, a missing package, too
large for the memory cap) is listed under ``not_runnable`` with its reason and left
out, like an operator without an included test; a problem whose candidate is missing,
crashed, hung or cheated stays in as not correct. A *weak* problem (a trivial answer
would pass it too, so a passing candidate proves nothing) is listed under ``weak`` and
left out as well.

* ``correctness_score``: correct problems / denominator.
* ``fast_p`` for p in 0, 0.5, 0.8, 1.0, 1.2, 1.5, 2.0 (KernelBench's fast_p, against
  eager timed live): the fraction of the
  denominator that is correct *and* whose device-time speedup over eager exceeds ``p``.
* ``fast_p_compile``: the same against ``torch.compile`` (``--compile-baseline``).
* ``levels``: per level (``"1"``, ``"2"``, ...; ``""`` for a folder without levels), its
  problems in the denominator, how many are correct, and its own ``fast_p`` (and
  ``fast_p_compile``), each over that level's problems.
* ``performance_score``: the geomean of the correct problems' speedups over eager.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from opbench.report import metrics
from opbench.run.store import TestResult

__all__ = ["problem_summaries", "program_scores"]


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
    correct = [op for op in denominator if ops[op].get("correct")]
    eager = {op: ops[op].get("speedup") for op in denominator}
    by_id = {r.test_id: r for r in results}
    comp = {
        op: ((by_id[op].details or {}).get("compile") or {}).get("speedup")
        for op in denominator
        if op in by_id
    }
    if compile_baseline:
        scores["fast_p_compile"] = metrics.fast_p(correct, comp, len(denominator))
        timed = [s for op, s in comp.items() if s is not None and op in correct]
        scores["performance_score_compile"] = metrics.geomean(timed)
    levels: dict[str, list[str]] = {}
    for op in denominator:
        levels.setdefault((by_id[op].case_json or {}).get("level") or "", []).append(op)
    scores["levels"] = {
        level: {
            "problems": len(ops_),
            "correct": sum(op in correct for op in ops_),
            "fast_p": metrics.fast_p(correct, {op: eager[op] for op in ops_}, len(ops_)),
            **(
                {
                    "fast_p_compile": metrics.fast_p(
                        correct, {op: comp.get(op) for op in ops_}, len(ops_)
                    )
                }
                if compile_baseline
                else {}
            ),
        }
        for level, ops_ in sorted(levels.items(), key=lambda kv: (len(kv[0]), kv[0]))
    }
    scores["problems_in_denominator"] = scores.get("ops_in_denominator")
    scores["problems_correct"] = scores.get("ops_correct")
    return {
        **scores,
        "ops": {op: v for op, v in ops.items() if op in set(denominator)},
        "not_runnable": dict(sorted(not_runnable.items())),
        "weak": dict(sorted(weak.items())),
    }
