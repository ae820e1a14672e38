"""Deciding a test, in the HARNESS, from raw data the worker sent.

The harness never imports candidate code. For each test it

1. plans the trials (:func:`opbench.judge.expectations.plan_trials`, which also holds
   what is expected of each seed): the case's seed, ``trials - 1`` seeds
   derived from it (same shapes, new values: a kernel that caches results by shape or
   pointer fails the second), and, when every one of those would also accept a trivial
   answer, a re-drawn seed whose inputs do not (``details["redrawn_seed"]``). It
   computes eager PyTorch's outputs and a float64 reference for each seed on the way,
   and keeps them for step 3;
2. sends the case and the plan to a worker, which runs the kernel on fresh inputs for
   each seed and once more on the first seed's inputs, and sends back raw data
   (:mod:`opbench.instrument.candidate`): outputs, each input's storage after the
   call, object ids and storage addresses, what the observers saw, what changed in
   its process;
3. judges (:func:`judge_report`) against its own copies: the mutation diff against
   the inputs it built itself, aliasing from the ids and addresses, the guard's rules
   on the recorded calls (:mod:`opbench.judge.guard`), values against its references,
   determinism by comparing the repeat's outputs with the first trial's, and weakness.

Determinism rule: a candidate whose repeat differs bitwise is ``nondeterministic``. It
fails unless PyTorch documents the op as nondeterministic on that device: random ops
(tagged ``nondeterministic_seeded``), ops tagged ``nondeterministic_bitwise``, and on
CUDA the ops listed in ``torch.use_deterministic_algorithms``'s documentation as
nondeterministic (:data:`CUDA_NONDETERMINISTIC`: atomics-based scatter/index
accumulation, pooling/upsampling backwards, ...); for those it is a warning in
``details``. On CPU the tags apply, plus :data:`CPU_NONDETERMINISTIC` (measured).
It is also only a warning when eager PyTorch itself differs between two runs on the
same inputs.

Weak tests: a trial is weak when a trivial answer (zeros, a constant, a copy of the
first input) would pass its tolerance. The test is ``weak`` (left out of the verdict)
only when every trial is weak.

The aten backend's kernel is the judged ``OpOverload`` itself; the guard skips it (see
:func:`opbench.spec.reference.is_reference_backend`).

This module owns the entry points (:func:`judge_report`, :func:`judge_in_process`) and the
order of the checks; the checks and :class:`Verdict` are :mod:`opbench.judge.checks`'s,
the rules they apply :mod:`opbench.judge.trial_rules`'s.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opbench.instrument.records import CandidateReport, TrialPlan, TrialResult
from opbench.judge import checks
from opbench.judge import guard as guard_mod
from opbench.judge.checks import STATUSES, Verdict, fail, verdict_to_dict
from opbench.judge.expectations import (
    Expectations,
    NotRunnableHere,
    generator_dependent_outputs,
    plan_trials,
    trial_seeds,
)
from opbench.judge.trial_rules import (
    CPU_NONDETERMINISTIC,
    CUDA_NONDETERMINISTIC,
    compare_kwargs,
    compare_to_expected,
    trial_label,
)
from opbench.spec.judge_options import JudgeOptions
from opbench.spec.ops import get_overload
from opbench.suites.case import Case, derive_seed

__all__ = [
    "JudgeOptions",
    "TrialPlan",
    "TrialResult",
    "CandidateReport",
    "Verdict",
    "Expectations",
    "plan_trials",
    "judge_report",
    "judge_in_process",
    "trial_seeds",
    "derive_seed",
    "CUDA_NONDETERMINISTIC",
    "CPU_NONDETERMINISTIC",
    "STATUSES",
    "compare_kwargs",
    "compare_to_expected",
    "generator_dependent_outputs",
    "verdict_to_dict",
]


def judge_report(
    case: Case,
    report: CandidateReport,
    device: str,
    options: JudgeOptions,
    expectations: Expectations | None = None,
    *,
    guard: bool = True,
) -> Verdict:
    """Decide a test from the worker's report, with references computed here
    (``expectations`` from :func:`plan_trials` are reused; missing seeds are computed).
    ``guard``: False only when the backend is PyTorch itself (the harness knows the
    backend; a report that says its calls were not observed is not taken on trust)."""
    try:
        j = checks.Judging.start(case, report, device, options, dict(expectations or {}), guard)
        return _judge(j)
    except NotRunnableHere as e:
        return Verdict("skipped", None, str(e))


def judge_in_process(
    case: Case,
    kernel: Callable[..., Any],
    device: str,
    options: JudgeOptions,
) -> Verdict:
    """Plan, run and judge ``kernel`` in this process: for trusted kernels only (tests,
    ``opbench repro`` scripts). Runs that judge candidates use worker processes."""
    from opbench.instrument.candidate import run_candidate

    plan, expectations = plan_trials(case, device, options)
    report = run_candidate(case, kernel, device, options, plan)
    guard = not guard_mod.is_reference_kernel(kernel, get_overload(case.op))
    return judge_report(case, report, device, options, expectations, guard=guard)


def _judge(j: checks.Judging) -> Verdict:
    """The checks of :mod:`opbench.judge.checks` in order; the first verdict decides."""
    report = j.report
    if not report.trials:
        return fail("error", "the worker sent no trial")
    verdict = checks.check_tampering(j) or checks.check_trial_count(j) or checks.check_random(j)
    if verdict is not None:
        return verdict
    for idx, tr in enumerate(report.trials):
        label = trial_label(idx, tr)
        if tr.status == "skipped":
            return Verdict("skipped", None, f"inputs not runnable: {tr.message}")
        exp = j.expected_for(tr.seed)  # raises NotRunnableHere
        verdict = (
            checks.check_declined(j, tr, exp, label)
            or checks.check_guard(j)  # 1.
            or checks.check_raised(j, tr, label)
            or checks.check_output_types(j, tr, label)  # 2.
            or checks.check_aliasing(j, tr, exp, label)  # 3.
            or checks.check_mutations(j, tr, exp, label)  # 4.
        )
        if verdict is not None:
            return verdict
        res = checks.compare_trial(j, tr, exp)  # 5.
        verdict = checks.check_values(j, tr, exp, res, label) or checks.check_strides(
            j, tr, exp, label
        )
        if verdict is not None:
            return verdict
        checks.record_trial(j, tr, exp, res)  # errors, outputs, 6. weak?
    return checks.check_determinism(j) or checks.passed(j)  # 7.
