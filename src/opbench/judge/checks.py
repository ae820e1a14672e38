"""The checks of one test, in the order the judge applies them, and the verdict they give.

Owns :class:`Verdict` (the judge's decision on one test), :class:`Judging` (what the
checks of one test share: the case, the worker's report, the overload's contract, the
details and warnings gathered so far, the errors and weakness of the trials judged) and
the checks themselves. Each check returns a failing (or skipping) :class:`Verdict`, or
None to go on; :func:`opbench.judge.evaluate.judge_report` runs them in order and the
first verdict decides. Before the trials: tampering, the trial count, random ops. For
each trial: the kernel declined, 1. the guard, the kernel raised, 2. output types,
3. aliasing, 4. mutated inputs, 5. values and strides, 6. weakness. After them:
7. determinism, then :func:`passed`. The rules the checks apply are
:mod:`opbench.judge.trial_rules`'s and :mod:`opbench.judge.guard`'s.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from opbench.instrument.records import CandidateReport, TrialResult
from opbench.judge import correctness as corr
from opbench.judge import guard as guard_mod
from opbench.judge.expectations import (
    Expectations,
    Expected,
    eager_again,
    eager_is_deterministic,
    expect,
    generator_dependent_outputs,
    is_random,
    trivial_for,
)
from opbench.judge.trial_rules import (
    alias_problem,
    compare_kwargs,
    compare_to_expected,
    compare_written,
    defined_equal,
    diff_summary,
    documented_nondeterministic,
    eager_unreliable,
    mutations,
    stride_problem,
    top_arg,
)
from opbench.spec.call import (
    UNINITIALIZED_OPS,
    arg_names,
    is_written,
    variant_kind,
    written_args,
)
from opbench.spec.judge_options import JudgeOptions
from opbench.spec.ops import get_overload
from opbench.suites.case import Case

__all__ = [
    "STATUSES",
    "Judging",
    "Verdict",
    "check_aliasing",
    "check_declined",
    "check_determinism",
    "check_guard",
    "check_mutations",
    "check_output_types",
    "check_raised",
    "check_random",
    "check_strides",
    "check_tampering",
    "check_trial_count",
    "check_values",
    "compare_trial",
    "fail",
    "passed",
    "record_trial",
    "verdict_to_dict",
]

STATUSES = ("passed", "failed", "not_implemented", "skipped")


@dataclass
class Verdict:
    """The judge's decision on one test. ``details`` is JSON-serialisable."""

    status: str
    category: str | None
    message: str
    weak: bool = False
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    details: dict[str, Any] = field(default_factory=dict)


def verdict_to_dict(v: Verdict) -> dict[str, Any]:
    """A plain dict of a verdict (for JSON)."""
    return asdict(v)


def fail(category: str, message: str, **kw: Any) -> Verdict:
    return Verdict("failed", category, message, **kw)


@dataclass
class Judging:
    """One test being judged: its inputs, the overload's contract, and what the checks
    have gathered so far (details and warnings for the verdict, the trials' errors,
    weakness and outputs)."""

    case: Case
    report: CandidateReport
    device: str
    options: JudgeOptions
    expectations: Expectations
    guard: bool
    overload: torch._ops.OpOverload
    kind: str
    written: Any
    names: list[str]
    returns_alias: bool
    uninitialized: bool
    details: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    guard_all: Any = None
    generator_dependent: frozenset[str] = frozenset()
    worst_abs: float | None = None
    worst_rel: float | None = None
    weak_flags: list[bool] = field(default_factory=list)
    trivial_seen: dict[int, list[str]] = field(default_factory=dict)
    previous: list[tuple[Any, Any]] = field(default_factory=list)  # (candidate, eager) outputs

    @classmethod
    def start(
        cls,
        case: Case,
        report: CandidateReport,
        device: str,
        options: JudgeOptions,
        expectations: Expectations,
        guard: bool,
    ) -> Judging:
        overload = get_overload(case.op)
        base = overload._schema.name.removeprefix("aten::")
        # Like commands.run.run_cmd's RunRequest(...) keywords, kept apart: another record
        return cls(
            case=case,
            report=report,
            device=device,
            options=options,
            expectations=expectations,
            guard=guard,
            overload=overload,
            kind=variant_kind(overload),
            written=written_args(overload),
            names=arg_names(overload),
            returns_alias=any(r.alias_info is not None for r in overload._schema.returns),
            uninitialized=base in UNINITIALIZED_OPS,
            details={"trials": [t.seed for t in report.trials]},
        )

    def expected_for(self, seed: int) -> Expected:
        if seed not in self.expectations:
            self.expectations[seed] = expect(
                self.case, self.overload, self.device, seed
            )  # may raise
        return self.expectations[seed]


# --------------------------------------------------------------------------- before the trials


def check_tampering(j: Judging) -> Verdict | None:
    """Tampering anywhere (a trial, the repeat, the observer) decides the test. Also
    classifies every call the kernel made, for the guard (:func:`check_guard`)."""
    report = j.report
    everything = [*report.trials, *([report.repeat] if report.repeat else [])]
    calls: dict[tuple[str, bool], int] = {}
    for tr in everything:
        for n, into, k in tr.calls:
            calls[(n, into)] = calls.get((n, into), 0) + int(k)
    j.guard_all, silenced = guard_mod.classify_trial(
        j.case.op, [(n, into, k) for (n, into), k in calls.items()], report.observed
    )
    tamper = [line for tr in everything for line in tr.tamper] + silenced
    if j.guard and any(tr.guard != "on" for tr in everything):
        tamper.append("the worker ran the kernel without its call observers")
    if tamper:
        return fail(
            "tampering",
            f"the kernel changed the judge's process: {'; '.join(tamper[:5])}",
            details={**j.details, "tampering": tamper},
        )
    return None


def check_trial_count(j: Judging) -> Verdict | None:
    trials = j.report.trials
    if len([t for t in trials if not t.redraw]) < max(1, j.options.trials) and all(
        t.status == "ok" for t in trials
    ):
        return fail("error", "the worker ran fewer trials than asked")
    return None


def check_random(j: Judging) -> Verdict | None:
    """Random ops: values that vary with the generator are not comparable; the outputs
    that do not (cuDNN RNN's output and states next to its reserve space) still are."""
    if not is_random(j.overload):
        return None
    seed0 = j.report.trials[0].seed
    b = eager_again(j.case, j.overload, j.device, seed0)
    varying = generator_dependent_outputs(j.expected_for(seed0).eager, b)
    if varying is None:
        return Verdict("skipped", None, "random op: its values depend on the generator, not judged")
    if varying:
        j.generator_dependent = varying
        j.details["generator_dependent_outputs"] = sorted(varying)
    return None


# --------------------------------------------------------------------------- each trial


def check_declined(j: Judging, tr: TrialResult, exp: Expected, label: str) -> Verdict | None:
    """Notes where the reference came from; the kernel may decline the case."""
    if exp.ref_note:
        j.details["reference"] = exp.ref_note
    if tr.status == "not_implemented":
        return Verdict(
            "not_implemented", "not_implemented", label + f"kernel declined: {tr.message}"
        )
    return None


def check_guard(j: Judging) -> Verdict | None:
    """1. The guard, over every call of the test (also for a kernel that raised:
    delegating, then failing, is no excuse)."""
    if not j.guard:
        j.details["guard"] = "skipped: the kernel is the judged ATen overload itself"
        return None
    g = j.guard_all
    if g.allowed:
        j.details.setdefault("allowed_calls", g.allowed)
    if not g.ok:
        if not j.options.allow_pytorch:
            return fail("calls_pytorch", g.message(), details={**j.details, "calls": g.violations})
        if g.message() not in j.warnings:
            j.warnings.append(g.message())
        j.details["calls_pytorch"] = g.violations
    return None


def check_raised(j: Judging, tr: TrialResult, label: str) -> Verdict | None:
    if tr.status == "error":
        return fail(
            "error",
            label + f"{tr.error_type}: {tr.message}",
            details={**j.details, "traceback": tr.traceback or ""},
        )
    return None


def check_output_types(j: Judging, tr: TrialResult, label: str) -> Verdict | None:
    """2. Outputs must be plain tensors with real storage."""
    problems = guard_mod.output_problems_from_meta(tr.output_meta)
    if problems:
        return fail("cheat", label + "; ".join(problems), details=j.details)
    return None


def check_aliasing(j: Judging, tr: TrialResult, exp: Expected, label: str) -> Verdict | None:
    """3. In-place returns self, out= returns out, functional returns new tensors."""
    bad = alias_problem(j.case.op, j.kind, tr, exp, j.returns_alias)
    if bad:
        return fail("bad_alias", label + bad, details=j.details)
    return None


def check_mutations(j: Judging, tr: TrialResult, exp: Expected, label: str) -> Verdict | None:
    """4. Inputs the op must not write are unchanged (against the harness's own copy)."""
    for path, n in mutations(tr, exp).items():
        top = top_arg(path)
        names = j.names
        arg_name = names[int(top)] if top.isdigit() and int(top) < len(names) else top
        if is_written(top, j.overload, j.written):
            continue
        what = "its layout changed" if n < 0 else f"{n} elements changed"
        return fail(
            "mutates_input",
            label + f"the kernel wrote into input {path} ({arg_name}), which {j.case.op} "
            f"must not modify: {what}",
            details=j.details,
        )
    return None


def compare_trial(j: Judging, tr: TrialResult, exp: Expected) -> corr.Comparison:
    """5. The values (and written arguments such as running statistics), against the
    harness's eager output and float64 reference for the trial's seed."""
    cmp_kw = compare_kwargs(j.case, j.options, exp)
    res = compare_to_expected(
        exp,
        tr.outputs,
        tr.output_meta,
        cmp_kw,
        meta_only=True if j.uninitialized else exp.undefined | j.generator_dependent,
    )
    if res.ok and exp.eager_written:
        res = compare_written(tr, exp, cmp_kw)
    return res


def check_values(
    j: Judging, tr: TrialResult, exp: Expected, res: corr.Comparison, label: str
) -> Verdict | None:
    """5. A failed comparison fails the test; a wrong result that is exactly an earlier
    trial's output for different inputs is a ``cheat`` (results cached by shape or
    pointer)."""
    if not res.ok:
        if res.category == "wrong_result":
            for k, (prev_c, prev_e) in enumerate(j.previous):
                if corr.bitwise_equal(tr.outputs, prev_c) and not corr.bitwise_equal(
                    exp.eager, prev_e
                ):
                    return fail(
                        "cheat",
                        label + f"returned exactly the output of trial {k + 1} for "
                        "different inputs (results cached by shape or pointer?)",
                        max_abs_err=res.max_abs_err,
                        max_rel_err=res.max_rel_err,
                        details=j.details,
                    )
        return fail(
            res.category or "wrong_result",
            label + res.message,
            max_abs_err=res.max_abs_err,
            max_rel_err=res.max_rel_err,
            details={**j.details, **({"compare": res.details} if res.details else {})},
        )
    if res.details:
        j.details.setdefault("compare", res.details)
    return None


def check_strides(j: Judging, tr: TrialResult, exp: Expected, label: str) -> Verdict | None:
    """Strides, where the contract fixes them: in-place and out= keep eager's layout."""
    if j.kind in ("inplace", "out"):
        bad = stride_problem(j.kind, tr, exp)
        if bad:
            return fail("wrong_meta", label + bad, details=j.details)
    return None


def record_trial(j: Judging, tr: TrialResult, exp: Expected, res: corr.Comparison) -> None:
    """A trial that passed: its errors, its outputs (for :func:`check_values` on later
    trials), and 6. whether it is weak (a trivial answer would pass it too)."""
    if res.max_abs_err is not None:
        j.worst_abs = max(j.worst_abs or 0.0, res.max_abs_err)
    if res.max_rel_err is not None:
        j.worst_rel = max(j.worst_rel or 0.0, res.max_rel_err)
    j.previous.append((tr.outputs, exp.eager))
    unreliable = eager_unreliable(res.details)
    weak_flags = j.weak_flags
    if j.uninitialized:
        weak_flags.append(True)
        j.trivial_seen[tr.seed] = ["any values (uninitialised output)"]
    elif unreliable:
        weak_flags.append(True)
        j.trivial_seen[tr.seed] = [f"anything: eager PyTorch is unreliable here ({unreliable})"]
    elif j.options.check_weak and (not weak_flags or all(weak_flags)):
        # (once one trial is not weak the test is not weak: later trials skip the check)
        triv = trivial_for(j.case, j.overload, exp, j.options)
        weak_flags.append(bool(triv))
        if triv:
            j.trivial_seen[tr.seed] = triv
    else:
        weak_flags.append(False)


# --------------------------------------------------------------------------- after the trials


def check_determinism(j: Judging) -> Verdict | None:
    """7. Determinism: the repeat on the first trial's inputs, compared here."""
    report, case, device = j.report, j.case, j.device
    repeat_detail = ""
    repeat_differs = False
    if j.options.check_determinism and report.repeat is not None and report.trials:
        rep, first = report.repeat, report.trials[0]
        if rep.status != "ok":
            repeat_differs = True
            repeat_detail = f"the repeat on identical inputs raised: {rep.message}"
        else:
            undefined = j.expected_for(first.seed).undefined
            if not defined_equal(j.overload, rep.outputs, first.outputs, undefined):
                repeat_differs = True
                repeat_detail = diff_summary(rep.outputs, first.outputs)
    if repeat_differs and not j.uninitialized:
        if documented_nondeterministic(case.op, j.overload, device):
            j.warnings.append(
                f"nondeterministic (allowed for {case.op} on {device}): {repeat_detail}"
            )
        elif not eager_is_deterministic(case, j.overload, device, report.trials[0].seed):
            j.warnings.append(
                f"nondeterministic (so is eager PyTorch on these inputs): {repeat_detail}"
            )
        else:
            return fail(
                "nondeterministic",
                f"{repeat_detail}; PyTorch's {case.op} is deterministic on {device}",
                max_abs_err=j.worst_abs,
                max_rel_err=j.worst_rel,
                details=j.details,
            )
    return None


def passed(j: Judging) -> Verdict:
    """Every check passed: the verdict, weak when every trial was."""
    report, details, warnings = j.report, j.details, j.warnings
    redrawn = [t.seed for t in report.trials if t.redraw]
    if redrawn:
        details["redrawn_seed"] = redrawn[0]
    if report.redraw_seeds_tried:
        details["redraw_seeds_tried"] = list(report.redraw_seeds_tried)
    weak = bool(j.weak_flags) and all(j.weak_flags)
    if j.trivial_seen:
        details["trivial_answers_pass"] = {str(k): v for k, v in j.trivial_seen.items()}
    if warnings:
        details["warnings"] = warnings
    msg = ""
    if weak:
        kinds = sorted({k for v in j.trivial_seen.values() for k in v})
        msg = (
            f"weak test: a trivial answer ({', '.join(kinds)}) would also pass; "
            "left out of the verdict"
        )
    elif warnings:
        msg = "; ".join(warnings)
    return Verdict(
        "passed",
        None,
        msg,
        weak=weak,
        max_abs_err=j.worst_abs,
        max_rel_err=j.worst_rel,
        details=details,
    )
