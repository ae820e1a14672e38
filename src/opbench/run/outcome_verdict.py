"""A worker's outcome for one test turned into its :class:`~opbench.run.store.TestResult`:
the verdict, from the harness's expectations, whatever the outcome was (an answer, a
crash, a timeout). Shared by the slots that judge on harness threads
(:class:`~opbench.run.executor.LocalExecutor`) and in a judging process of their own
(:mod:`opbench.run.slot_judge`), so the two cannot judge one answer differently.
"""

from __future__ import annotations

import time
from typing import Any

from opbench.run.store import TestResult, case_fields
from opbench.run.worker_process import Outcome
from opbench.suites.case import Case

__all__ = ["judge_outcome"]


def judge_outcome(
    case: Case,
    outcome: Outcome,
    *,
    device: str,
    judge_options: Any,
    backend: str,
    worker: str,
    expectations: Any = None,
    unit_info: dict[str, Any] | None = None,
    scan: list[Any] | None = None,
) -> TestResult:
    """Turn what a worker sent (or how it died) into a :class:`TestResult`.

    ``expectations``: the references :func:`opbench.judge.evaluate.plan_trials`
    computed for this case (recomputed when missing); ``unit_info``: what the worker
    reported when it imported the case's unit (import-time tampering and calls);
    ``scan``: the static scan's findings for the unit (warnings, shown with the result).
    """
    base = case_fields(case, backend=backend, device=device, worker=worker)
    scan_details = {"static_scan": [f.to_dict() for f in scan]} if scan else {}
    if outcome.kind != "result":
        msg = outcome.detail
        if outcome.stderr_tail:
            msg += "\n--- last stderr lines ---\n" + outcome.stderr_tail
        return TestResult(
            status="failed", category=outcome.kind, message=msg, details=scan_details, **base
        )
    m = outcome.message or {}
    elapsed = m.get("elapsed_s")
    if m.get("worker_error"):
        return TestResult(
            status="failed",
            category="error",
            message=f"worker error: {m['worker_error']}",
            details={"traceback": m.get("tb", "")},
            duration_s=elapsed,
            **base,
        )
    # Like programs.judge.judge_program's not_implemented, kept apart: an op with no kernel
    if m.get("no_kernel"):
        return TestResult(
            status="not_implemented",
            category="not_implemented",
            message=f"the backend has no kernel for {case.op}",
            duration_s=elapsed,
            **base,
        )
    from opbench.judge.evaluate import CandidateReport, judge_report

    try:
        report = CandidateReport.from_plain(m["report"])
    except Exception as e:  # malformed report from an untrusted worker
        return TestResult(
            status="failed", category="error", message=f"unreadable report: {e}", **base
        )
    from opbench.judge.verdicts import import_verdict, timing_guard_verdict

    t_judge = time.perf_counter()
    from opbench.judge.neighbour_verdict import neighbour_verdict
    from opbench.spec.reference import is_reference_backend

    verdict = (
        import_verdict(case.op, unit_info, judge_options)
        or neighbour_verdict(
            m.get("neighbours"),
            allow_threads=bool(getattr(judge_options, "allow_threads", False)),
            when="test",
        )
        or judge_report(
            case,
            report,
            device,
            judge_options,
            expectations,
            guard=not is_reference_backend(backend),
        )
    )
    judge_s = time.perf_counter() - t_judge
    # Like instrument.timing._time_pair's PairTiming(...), kept apart: another record, same shape
    result = TestResult(
        status=verdict.status,
        category=verdict.category,
        message=verdict.message,
        weak=verdict.weak,
        max_abs_err=verdict.max_abs_err,
        max_rel_err=verdict.max_rel_err,
        details={
            **(verdict.details or {}),
            **scan_details,
            **call_route_details(m.get("call_route")),
            "judge_s": round(judge_s, 4),
        },
        duration_s=elapsed,
        **base,
    )
    if verdict.status != "passed":
        return result
    timed = timing_guard_verdict(case.op, m, judge_options)
    if timed is not None and timed.status != "passed":
        result.status, result.category, result.message = timed.status, timed.category, timed.message
        result.details.update(timed.details)
        return result
    if timed is not None and timed.details:
        result.details.update(timed.details)
    from opbench.judge.timed_output import (
        final_draw,
        judge_timed_output,
        kept_outputs,
        kept_outputs_problem,
    )

    gone = kept_outputs_problem(m)
    if gone:
        result.status, result.category, result.message = "failed", "cheat", gone
        return result
    for what, outputs, meta, draw in kept_outputs(m):
        late = judge_timed_output(
            case, outputs, meta, device, judge_options, expectations, what, draw, final_draw(m)
        )
        if late is not None:
            result.status, result.category, result.message = (
                late.status,
                late.category,
                late.message,
            )
            return result
    timing = m.get("timing")
    if timing:
        from opbench.judge.perf_verdict import apply_timing, work_for

        apply_timing(result, case, timing, device, work_for(case, device))
    return result


def call_route_details(route: Any) -> dict[str, Any]:
    """``{"call_route": ...}``: how the worker called the kernel (``native``: through the
    C++ gate, :mod:`opbench.instrument.native_calls`; ``replay``: the gate repeats the
    Python path's launches), as plain strings, a flag and counts; {} when it called the
    Python function alone or sent something else."""
    if not isinstance(route, dict) or route.get("route") not in ("native", "python"):
        return {}
    out: dict[str, Any] = {"route": route["route"]}
    for key in ("op", "why"):
        if isinstance(route.get(key), str):
            out[key] = route[key][:300]
    if isinstance(route.get("replay"), bool):
        out["replay"] = route["replay"]
    counts = route.get("counts")
    if isinstance(counts, dict):
        out["counts"] = {
            k: int(v)
            for k, v in counts.items()
            if k in ("native", "python", "replayed") and isinstance(v, int)
        }
    return {"call_route": out}
