"""Timed calls' outputs, judged in the HARNESS.

The correctness trials see a kernel's first calls; timing makes hundreds more. A kernel
that computes for the trials and returns an empty tensor once it has been called often
enough does no work and calls no PyTorch, so neither the values nor the guard would see
it; nor would they see one that returns the answer it remembered for the same input
tensors. The worker's timing wrapper keeps three timed calls' outputs (the last two,
which hold draw 0 and then draw 1 in the same tensors, and one drawn at random after
the call returned: :mod:`opbench.instrument.timed`), each with the input draw its call
held (each timed call holds one of two draws of the case, chosen at
random: :mod:`opbench.judge.timing_inputs`); here each is compared with the reference
for its draw under the trials' rule. The wrapper is the same object for every timed
call, so the kernel cannot tell which call is kept.
"""

from __future__ import annotations

from typing import Any

from opbench.instrument.timed import KEPT
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
from opbench.suites.case import Case, timing_seeds

__all__ = ["judge_timed_output", "kept_outputs"]


def kept_outputs(m: dict[str, Any]) -> list[tuple[str, Any, list[dict[str, Any]], int]]:
    """The timed calls' outputs a worker sent (:mod:`opbench.instrument.timed`): the
    last call's, and one drawn at random among all timed calls when it was another; each
    with the input draw its call saw (0 or 1, :mod:`opbench.judge.timing_inputs`)."""
    out = []
    for key, what in KEPT:
        if key in m:
            draw = m.get(f"{key}_draw", 0)
            draw = draw if draw in (0, 1) else 0
            out.append((what, m[key], list(m.get(f"{key}_meta") or []), draw))
    return out


def judge_timed_output(
    case: Case,
    outputs: Any,
    output_meta: list[dict[str, Any]],
    device: str,
    options: JudgeOptions,
    expectations: Expectations | None = None,
    what: str = "a timed call",
    draw: int = 0,
) -> Verdict | None:
    """None when a timed call's output (``what`` it was, on input ``draw``) passes (or
    cannot be judged: random and uninitialised-output ops, inputs not runnable here),
    else ``cheat``."""
    overload = get_overload(case.op)
    if is_random(overload) or overload._schema.name.removeprefix("aten::") in UNINITIALIZED_OPS:
        return None
    seed = timing_seeds(case)[draw]
    try:
        exp = (expectations or {}).get(seed) or expect(case, overload, device, seed)
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
        f"while checked, not while timed; inputs: timing draw {draw} of 0-1, each call's "
        f"chosen at random, so a remembered answer fails too): {res.message}",
        max_abs_err=res.max_abs_err,
        max_rel_err=res.max_rel_err,
    )
