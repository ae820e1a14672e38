"""The candidate's last timed call, judged in the HARNESS.

The correctness trials see a kernel's first calls; timing makes hundreds more. A kernel
that computes for the trials and returns an empty tensor once it has been called often
enough does no work and calls no PyTorch, so neither the values nor the guard would see
it. The worker's timing wrapper keeps the last timed call's output
(:mod:`opbench.instrument.timed`) and sends it back; here it is compared with the
reference for the timing inputs (the case's own seed) under the trials' rule. The
wrapper is the same object for every timed call, so the kernel cannot tell which call
is kept.
"""

from __future__ import annotations

from typing import Any

from opbench.judge import guard as guard_mod
from opbench.judge.evaluate import (
    JudgeOptions,
    Verdict,
    compare_kwargs,
    compare_to_expected,
)
from opbench.judge.expectations import Expectations, NotRunnableHere, expect, is_random
from opbench.spec.call import UNINITIALIZED_OPS
from opbench.spec.ops import get_overload
from opbench.suites.case import Case

__all__ = ["judge_timed_output", "kept_outputs"]


def kept_outputs(m: dict[str, Any]) -> list[tuple[str, Any, list[dict[str, Any]]]]:
    """The timed calls' outputs a worker sent (:mod:`opbench.instrument.timed`): the
    last call's, and one drawn at random among all timed calls when it was another."""
    out = []
    for key, what in (
        ("timed_output", "the last timed call"),
        ("timed_sample", "a timed call drawn at random"),
    ):
        if key in m:
            out.append((what, m[key], list(m.get(f"{key}_meta") or [])))
    return out


def judge_timed_output(
    case: Case,
    outputs: Any,
    output_meta: list[dict[str, Any]],
    device: str,
    options: JudgeOptions,
    expectations: Expectations | None = None,
    what: str = "a timed call",
) -> Verdict | None:
    """None when a timed call's output (``what`` it was) passes (or cannot be judged:
    random and uninitialised-output ops, inputs not runnable here), else ``cheat``."""
    overload = get_overload(case.op)
    if is_random(overload) or overload._schema.name.removeprefix("aten::") in UNINITIALIZED_OPS:
        return None
    try:
        exp = (expectations or {}).get(case.seed) or expect(case, overload, device, case.seed)
    except NotRunnableHere:
        return None
    problems = guard_mod.output_problems_from_meta(output_meta)
    if problems:
        return Verdict("failed", "cheat", f"{what} returned " + "; ".join(problems))
    res = compare_to_expected(
        exp, outputs, output_meta, compare_kwargs(case, options, exp), meta_only=exp.undefined
    )
    if res.ok:
        return None
    return Verdict(
        "failed",
        "cheat",
        f"the output of {what} is not the reference's for the same inputs (correct "
        f"while checked, not while timed): {res.message}",
        max_abs_err=res.max_abs_err,
        max_rel_err=res.max_rel_err,
    )
