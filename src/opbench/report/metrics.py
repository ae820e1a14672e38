"""Scores of a run, from its test results (pure functions, no I/O).

The rules (DESIGN.md):

* The denominator of every score is the set of asked operators with at least one
  included test. An operator whose kernel crashed, hung or cheated stays in it.
* An operator is *correct* when it has at least one passing non-weak test and no
  failing non-weak test. Weak tests (a trivial answer would also pass) are shown but
  left out of the verdict. ``not_implemented`` and ``not_run`` tests count as not passed.
* A ``judge_error`` test (the harness could not plan or judge it,
  :mod:`opbench.run.judge_errors`) is never counted against the backend: like a skipped
  test it is left out of the verdict, and an operator left with no other test leaves
  the denominator (``not_tested``).
* ``correctness_score`` = correct operators / denominator.
* An operator's speedup is the geometric mean (in log space) of the speedups of its
  passing, non-weak, timed tests; only correct operators get one. Failing tests never
  count as a speedup of 1.0.
* ``performance_score`` is the geometric mean of the operators' speedups (device time),
  ``performance_score_host`` the same with host-inclusive times. Operators without a
  speedup (not correct, or not timed) are left out of the mean; how many were in it is
  reported as ``performance_ops``, so a score over few operators cannot pass for one
  over many.
* ``fast_p`` is the fraction of the denominator that is correct *and* has a speedup
  above ``p`` (KernelBench); ``fast_0`` equals the correctness score.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from opbench.report.means import geomean
from opbench.run.judge_errors import JUDGE_ERROR
from opbench.run.store import TestResult

FAST_P_THRESHOLDS: tuple[float, ...] = (0.0, 0.5, 0.8, 1.0, 1.2, 1.5, 2.0)

#: Statuses that mean a test produced no verdict at all.
_NO_VERDICT = {"skipped", JUDGE_ERROR}


def _median(values: list[float]) -> float | None:
    if not values:
        return None
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def sol_fraction(r: TestResult) -> float | None:
    """The fraction of the machine's speed of light the candidate reached on test ``r``
    (its roofline estimate), when the op is modelled."""
    cand = ((r.details or {}).get("roofline") or {}).get("cand") or {}
    f = cand.get("sol_fraction")
    return f if isinstance(f, (int, float)) and math.isfinite(f) else None


#: ``--overhead-dominated`` choices: which timed tests feed the speedups.
OVERHEAD_CHOICES = ("include", "exclude", "only")


def _timed_for_score(r: TestResult, overhead_dominated: str) -> bool:
    flagged = "overhead_dominated" in (r.flags or [])
    if overhead_dominated == "exclude":
        return not flagged
    if overhead_dominated == "only":
        return flagged
    return True


def op_summaries(
    results: Iterable[TestResult], *, overhead_dominated: str = "include"
) -> dict[str, dict[str, Any]]:
    """Per-operator aggregation of test results.

    ``overhead_dominated`` (include | exclude | only) selects which timed tests feed the
    speedups: tests within 1.3x of the launch floor measure launch overhead, not kernels.
    Correctness is judged on every test either way.
    """
    if overhead_dominated not in OVERHEAD_CHOICES:
        raise ValueError(f"--overhead-dominated must be one of {', '.join(OVERHEAD_CHOICES)}")
    by_op: dict[str, list[TestResult]] = defaultdict(list)
    for r in results:
        by_op[r.op].append(r)
    out: dict[str, dict[str, Any]] = {}
    for op, rs in sorted(by_op.items()):
        judged = [r for r in rs if r.status not in _NO_VERDICT]
        strong = [r for r in judged if not r.weak]
        passed = [r for r in strong if r.status == "passed"]
        not_passed = [r for r in strong if r.status != "passed"]
        failures = Counter(r.category or r.status for r in not_passed)
        correct = bool(passed) and not not_passed
        timed = [
            r for r in passed if r.speedup is not None and _timed_for_score(r, overhead_dominated)
        ]
        timed_host = [
            r
            for r in passed
            if r.speedup_host is not None and _timed_for_score(r, overhead_dominated)
        ]
        out[op] = {
            "tests": len(judged),
            "passed": sum(1 for r in judged if r.status == "passed"),
            "weak": sum(1 for r in judged if r.weak),
            "skipped": sum(1 for r in rs if r.status == "skipped"),
            "judge_errors": sum(1 for r in rs if r.status == JUDGE_ERROR),
            "not_implemented": sum(1 for r in judged if r.status == "not_implemented"),
            "correct": correct,
            "failures": dict(sorted(failures.items())),
            "speedup": geomean(r.speedup for r in timed) if correct else None,
            "speedup_host": geomean(r.speedup_host for r in timed_host) if correct else None,
            "timed_tests": len(timed),
            "spread": _median([r.spread for r in timed if r.spread is not None]),
            "sol_fraction": _median([f for f in map(sol_fraction, timed) if f is not None]),
        }
        if not strong and judged:
            out[op]["note"] = "only weak tests: not counted as correct"
    return out


def fast_p(
    correct: Iterable[str], speedups: Mapping[str, float | None], n: int
) -> dict[str, float | None]:
    """KernelBench's ``fast_p`` for every threshold of :data:`FAST_P_THRESHOLDS`
    (``{"0": .., "0.5": .., ..., "2.0": ..}``): the fraction of the ``n`` entries of the
    denominator that are in ``correct`` and whose speedup is above ``p``; None where the
    denominator is empty, or (for p > 0) where nothing correct was timed."""
    right = set(correct)
    timed = {k: s for k, s in speedups.items() if s is not None and k in right}
    out: dict[str, float | None] = {}
    for p in FAST_P_THRESHOLDS:
        key = "0" if p == 0 else f"{p:.1f}"
        if n == 0:
            out[key] = None
        elif p == 0:
            out[key] = len(right) / n
        elif not timed:
            out[key] = None
        else:
            out[key] = sum(1 for s in timed.values() if s > p) / n
    return out


def scores(
    ops: Mapping[str, Mapping[str, Any]],
    denominator: Iterable[str],
) -> dict[str, Any]:
    """The run's scores over ``denominator`` (asked ops with at least one included test)."""
    denom = sorted(set(denominator))
    n = len(denom)
    correct = [op for op in denom if ops.get(op, {}).get("correct")]
    speedups = {op: ops[op]["speedup"] for op in correct if ops[op].get("speedup") is not None}
    speedups_host = {
        op: ops[op]["speedup_host"] for op in correct if ops[op].get("speedup_host") is not None
    }
    return {
        "correctness_score": (len(correct) / n) if n else None,
        "performance_score": geomean(speedups.values()),
        "performance_score_host": geomean(speedups_host.values()),
        "performance_ops": len(speedups),
        "fast_p": fast_p(correct, speedups, n),
        "ops_in_denominator": n,
        "ops_correct": len(correct),
    }


def judge_error_counts(results: Iterable[TestResult]) -> dict[str, int]:
    """Tests per operator that the harness could not plan or judge (``judge_error``):
    a run with any is incomplete, whatever its scores say."""
    return dict(sorted(Counter(r.op for r in results if r.status == JUDGE_ERROR).items()))


def test_counts(results: Iterable[TestResult]) -> dict[str, Any]:
    rs = list(results)
    by_status = Counter(r.status for r in rs)
    by_category = Counter(r.category for r in rs if r.category)
    return {
        "total": len(rs),
        "passed": by_status.get("passed", 0),
        "weak": sum(1 for r in rs if r.weak),
        "by_status": dict(sorted(by_status.items())),
        "by_category": dict(sorted(by_category.items())),
    }
