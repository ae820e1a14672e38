"""Deciding a program problem, in the HARNESS, from what its worker sent.

The worker (:mod:`opbench.programs.instrument`) reports raw data; this module decides,
against references the harness computed itself (:mod:`opbench.programs.reference`):

* the worker died, hung or ran out of memory: ``crash`` / ``timeout`` / ``oom``;
* the candidate changed the judge's process (patched torch, settings): ``tampering``;
* ``ModelNew`` does not take the reference's ``state_dict`` (strict): ``wrong_meta``,
  "state_dict mismatch" (weights are matched by name, never by random-draw order);
* it raised: ``error`` (``NotImplementedError``: ``not_implemented``);
* the inputs it was given are not the ones the harness built from the same seed (a
  ``get_inputs`` that ignores its seed): not judged, ``not_runnable``;
* outputs that are not plain tensors: ``cheat``; one trial's outputs repeated for other
  inputs: ``cheat`` (cached results);
* values: opbench's rule (:func:`opbench.judge.correctness.compare_outputs`, the norm
  fallback allowed, since a program accumulates like a reduction): ``wrong_result``,
  ``wrong_meta``, ``nan_mismatch``;
* with timing, the last timed call's output (on the first seed's inputs) must pass too,
  else ``cheat``: a candidate that computes only while it is being checked;
* a passing candidate on a problem where a trivial answer (zeros, a constant) passes
  every seed too: ``weak``, left out of the verdict (as an operator's weak test), since
  the problem cannot tell a right ``ModelNew`` from a lazy one.

A passing problem gets its times: device-time and host-inclusive speedups against eager
(timed live, interleaved), and against ``torch.compile`` when asked.
"""

from __future__ import annotations

import math
from typing import Any

from opbench.judge import correctness as corr
from opbench.judge.guard import output_problems_from_meta
from opbench.judge.timed_output import kept_outputs, kept_outputs_problem
from opbench.programs.reference import Expected
from opbench.run.pool import Outcome
from opbench.run.store import TestResult

__all__ = ["judge_program", "timing_fields"]

#: The ``op`` name the correctness rule sees: programs accumulate, never elementwise only.
_OP = "program"


def _fail(base: dict[str, Any], category: str, message: str, **kw: Any) -> TestResult:
    return TestResult(status="failed", category=category, message=message, **base, **kw)


def judge_program(
    base: dict[str, Any],
    outcome: Outcome,
    expected: list[Expected],
    *,
    rtol_scale: float = 1.0,
    atol_scale: float = 1.0,
    work_device: str | None = None,
    allow_threads: bool = False,
) -> TestResult:
    """A :class:`TestResult` from one worker answer; ``base`` holds the test's fields
    (``test_id``, ``op``, ``suite``, ...), ``expected`` the harness's references, one per
    trial seed, in the order the worker was asked to run them. ``work_device``: where
    outputs are compared (the run's GPU; default the CPU); ``allow_threads``: the run
    passed ``--allow threads`` (:mod:`opbench.judge.neighbour_verdict`)."""
    if outcome.kind != "result":
        msg = outcome.detail
        if outcome.stderr_tail:
            msg += "\n--- last stderr lines ---\n" + outcome.stderr_tail
        return _fail(base, outcome.kind, msg)
    m = outcome.message or {}
    elapsed = m.get("elapsed_s")
    if m.get("worker_error"):
        return _fail(
            base,
            "error",
            f"worker error: {m['worker_error']}",
            details={"traceback": m.get("tb", "")},
            duration_s=elapsed,
        )
    from opbench.judge.neighbour_verdict import neighbour_lines

    tamper = list(m.get("tamper") or [])
    tamper += neighbour_lines(m.get("neighbours"), allow_threads=allow_threads)
    if tamper:
        return _fail(
            base,
            "tampering",
            f"the candidate changed the judge's process: {'; '.join(map(str, tamper[:5]))}",
            details={"tampering": tamper},
            duration_s=elapsed,
        )
    # Like run.outcome_verdict.judge_outcome's no_kernel result, kept apart: a program's own decline
    if m.get("not_implemented"):
        return TestResult(
            status="not_implemented",
            category="not_implemented",
            message=f"the candidate declined: {m['not_implemented']}",
            duration_s=elapsed,
            **base,
        )
    if m.get("state_dict_error"):
        return _fail(
            base,
            "wrong_meta",
            "state_dict mismatch: ModelNew does not take Model's weights by name "
            f"(load_state_dict(strict=True)): {m['state_dict_error']}",
            duration_s=elapsed,
        )
    if m.get("candidate_error"):
        return _fail(
            base,
            "error",
            str(m["candidate_error"]),
            details={"traceback": m.get("tb", "")},
            duration_s=elapsed,
        )
    verdict = _judge_trials(
        base, m.get("trials") or [], expected, rtol_scale, atol_scale, work_device
    )
    verdict.duration_s = elapsed
    if verdict.status != "passed":
        return verdict
    late = list(m.get("timing_tamper") or [])
    if late:
        return _fail(
            base,
            "tampering",
            f"the process changed while timed: {'; '.join(map(str, late[:5]))}",
            details={"tampering": late},
            duration_s=elapsed,
        )
    gone = kept_outputs_problem(m) if expected else None
    if gone:
        return _fail(base, "cheat", gone, details=verdict.details, duration_s=elapsed)
    for what, outputs, meta, draw in kept_outputs(m) if expected else []:
        # draw 1 is the second trial's seed (programs/instrument.py)
        exp = expected[draw] if draw < len(expected) else expected[0]
        what = f"{what} (timing draw {draw} of 0-1, chosen per call at random)"
        bad = _timed_output_problem(what, outputs, meta, exp, rtol_scale, atol_scale, work_device)
        if bad:
            return _fail(base, "cheat", bad, details=verdict.details, duration_s=elapsed)
    timing_fields(verdict, m)
    return verdict


def _compare(
    outputs: Any,
    meta: Any,
    exp: Expected,
    rtol_scale: float,
    atol_scale: float,
    work_device: str | None = None,
) -> corr.Comparison:
    """A candidate's outputs (as the worker sent them) against the harness's references
    for the same seed, under opbench's rule with the norm fallback."""
    return corr.compare_outputs(
        outputs,
        exp.eager,
        exp.ref,
        op=_OP,
        rtol_scale=rtol_scale,
        atol_scale=atol_scale,
        cand_devices=corr.devices_from_meta(list(meta or [])),
        eager_devices=exp.eager_devices,
        norm_fallback=True,
        work_device=work_device,
    )


def _timed_output_problem(
    what: str, outputs: Any, meta: list[dict[str, Any]], first: Expected,
    rtol_scale: float, atol_scale: float, work_device: str | None = None,
) -> str | None:  # fmt: skip
    """Every timed call ran on the first seed's inputs: a kept one's output must pass as
    the trials' did, else the candidate computed only while it was being checked."""
    problems = output_problems_from_meta(meta)
    if problems:
        return f"{what} returned " + "; ".join(problems)
    res = _compare(outputs, meta, first, rtol_scale, atol_scale, work_device)
    if res.ok:
        return None
    return (
        f"the output of {what} is not the reference's for the same inputs (correct "
        f"while checked, not while timed): {res.message}"
    )


def _judge_trials(
    base: dict[str, Any],
    trials: list[dict[str, Any]],
    expected: list[Expected],
    rtol_scale: float,
    atol_scale: float,
    work_device: str | None = None,
) -> TestResult:
    if not trials:
        return _fail(base, "error", "the worker sent no trial")
    details: dict[str, Any] = {"trials": [t.get("seed") for t in trials]}
    worst_abs: float | None = None
    worst_rel: float | None = None
    previous: list[tuple[Any, Any]] = []
    by_seed = {e.seed: e for e in expected}
    for idx, tr in enumerate(trials):
        label = "" if idx == 0 else f"trial {idx + 1} (seed {tr.get('seed')}): "
        exp = by_seed.get(tr.get("seed"))
        if exp is None:
            return _fail(base, "error", label + "the worker ran a seed it was not given")
        if exp.ref_note:
            details["reference"] = exp.ref_note
        status = tr.get("status")
        if status == "not_implemented":
            return TestResult(
                status="not_implemented",
                category="not_implemented",
                message=label + f"the candidate declined: {tr.get('message')}",
                details=details,
                **base,
            )
        if status == "error":
            return _fail(
                base,
                "error",
                label + str(tr.get("message")),
                details={**details, "traceback": tr.get("traceback", "")},
            )
        if list(tr.get("input_digests") or []) != exp.input_digests:
            return TestResult(
                status="skipped",
                category="not_runnable",
                message=label + "get_inputs() did not give the same inputs for the same seed "
                "in the harness and the worker (it draws from a source the seed does not "
                "fix), so the candidate cannot be compared with the reference",
                details=details,
                **base,
            )
        problems = output_problems_from_meta(list(tr.get("output_meta") or []))
        if problems:
            return _fail(base, "cheat", label + "; ".join(problems), details=details)
        res = _compare(
            tr.get("outputs"), tr.get("output_meta"), exp, rtol_scale, atol_scale, work_device
        )
        if not res.ok:
            if res.category == "wrong_result":
                for j, (prev_c, prev_e) in enumerate(previous):
                    if corr.bitwise_equal(tr.get("outputs"), prev_c) and not corr.bitwise_equal(
                        exp.eager, prev_e
                    ):
                        return _fail(
                            base,
                            "cheat",
                            label + f"returned exactly the output of trial {j + 1} for "
                            "different inputs (results cached?)",
                            details=details,
                        )
            return _fail(
                base,
                res.category or "wrong_result",
                label + res.message,
                max_abs_err=res.max_abs_err,
                max_rel_err=res.max_rel_err,
                details={**details, **({"compare": res.details} if res.details else {})},
            )
        previous.append((tr.get("outputs"), exp.eager))
        if res.max_abs_err is not None:
            worst_abs = max(worst_abs or 0.0, res.max_abs_err)
        if res.max_rel_err is not None:
            worst_rel = max(worst_rel or 0.0, res.max_rel_err)
    if len(trials) < len(expected):
        return _fail(base, "error", "the worker ran fewer trials than asked", details=details)
    trivial = _trivial_passes(
        [by_seed[t.get("seed")] for t in trials], rtol_scale, atol_scale, work_device
    )
    message = ""
    if trivial:
        details["trivial_answers_pass"] = trivial
        message = (
            f"weak problem: a trivial answer ({', '.join(trivial)}) would also pass every "
            "seed's tolerance; left out of the verdict"
        )
    # Like commands.run.run_cmd's RunRequest(...) keywords, kept apart: another record
    return TestResult(
        status="passed",
        category=None,
        message=message,
        weak=bool(trivial),
        max_abs_err=worst_abs,
        max_rel_err=worst_rel,
        details=details,
        **base,
    )


def _trivial_passes(
    expected: list[Expected], rtol_scale: float, atol_scale: float, work_device: str | None = None
) -> list[str]:
    """The trivial answers (zeros, the reference's mean as a constant) that pass on every
    seed: then the problem cannot tell a right ``ModelNew`` from a lazy one (outputs so
    small that zeros pass, or nearly constant across inputs), and a passing candidate
    proves nothing. Empty once one seed rejects them all."""
    common: list[str] | None = None
    for exp in expected:
        kinds = corr.trivial_answers(
            exp.eager, exp.ref, None, allow_input_copy=False, op=_OP,
            rtol_scale=rtol_scale, atol_scale=atol_scale, norm_fallback=True,
            work_device=work_device,
        )  # fmt: skip
        common = kinds if common is None else [k for k in common if k in kinds]
        if not common:
            return []
    return common or []


def _ratio(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and x > 0 and math.isfinite(x) else None


def timing_fields(result: TestResult, m: dict[str, Any]) -> None:
    """Copy the worker's timings into ``result``: eager against the candidate in the
    result's own columns, ``torch.compile`` against the candidate under
    ``details["compile"]``. A ratio that is not positive and finite is dropped (a timing
    bug upstream must not become a speedup)."""
    from opbench.judge.timing_rules import derive

    t = m.get("timing")
    if isinstance(t, dict):
        # the same derivation as operator runs (judge/perf_verdict.py): the worker's
        # measurements only, never a speedup or flag it claims
        d = derive(t)
        result.ref_device_ms = t.get("ref_device_ms")
        result.cand_device_ms = t.get("cand_device_ms")
        result.ref_host_ms = t.get("ref_host_ms")
        result.cand_host_ms = t.get("cand_host_ms")
        result.speedup = _ratio(d["speedup_device"])
        result.speedup_host = _ratio(d["speedup_host"])
        result.spread = t.get("spread")
        result.flags = list(d["flags"])
        result.timing = {**t, "derived": d}
    elif m.get("timing_error"):
        result.details["timing_error"] = m["timing_error"]
    tc = m.get("timing_compile")
    if isinstance(tc, dict):
        dc = derive(tc)
        result.details["compile"] = {
            "compile_device_ms": tc.get("ref_device_ms"),
            "cand_device_ms": tc.get("cand_device_ms"),
            "compile_host_ms": tc.get("ref_host_ms"),
            "cand_host_ms": tc.get("cand_host_ms"),
            "speedup": _ratio(dc["speedup_device"]),
            "speedup_host": _ratio(dc["speedup_host"]),
            "flags": list(dc["flags"]),
        }
    for key in ("compile_error", "timing_compile_error"):
        if m.get(key):
            result.details.setdefault("compile", {})["error"] = m[key]
    # how long the worker's compile took, and how many cached files it started from
    for key, name in (("compile_s", "compile_s"), ("compile_cache_files", "cache_files")):
        if m.get(key) is not None:
            result.details.setdefault("compile", {})[name] = m[key]
