"""Timed calls' outputs, judged in the HARNESS.

The correctness trials see a kernel's first calls; timing makes hundreds more. A kernel
that computes for the trials and returns an empty tensor once it has been called often
enough does no work and calls no PyTorch, so neither the values nor the guard would see
it; nor would they see one that returns the answer it remembered for the same input
tensors. The worker's timing wrapper keeps up to five timed calls' outputs (the last
two, which hold draw 0 and then draw 1 in the same tensors; two consecutive device-timed
calls on different draws; and one drawn at random after the call returned:
:mod:`opbench.instrument.timed`), each with the input draw its call held (each timed call holds one of two draws of the case, chosen at
random: :mod:`opbench.instrument.timing_inputs`); here each is compared with the reference
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

__all__ = [
    "PLANNED_DRAWS",
    "final_draw",
    "judge_timed_output",
    "kept_outputs",
    "kept_outputs_problem",
]


#: The input draw the protocol gives each of the last two timed calls when the timing ran
#: on two draws (:func:`opbench.instrument.timing_loops.last_calls`: draw 0, then draw 1, in the
#: same tensors). The harness knows these; it does not take the worker's word for them.
PLANNED_DRAWS = {"timed_output": 1, "timed_previous": 0}


def _final_timing(m: dict[str, Any]) -> dict[str, Any] | None:
    """The timing record of the last timed pair the kept calls came from, or None when
    that pair did not finish (its last two calls are then not the protocol's pair). A
    program is timed against eager, then against its compiled form, with one wrapper."""
    if "timing_compile_error" in m:
        return None
    rec = m.get("timing_compile") or m.get("timing")
    return rec if isinstance(rec, dict) else None


def kept_outputs(m: dict[str, Any]) -> list[tuple[str, Any, list[dict[str, Any]], int]]:
    """The timed calls' outputs a worker sent (:mod:`opbench.instrument.timed`): the
    last two calls', a device-timed pair's and one drawn at random among all timed calls
    when it was another; each with the input draw its call saw (0 or 1, :mod:`opbench.instrument.timing_inputs`).
    The draws are the harness's own where it knows them: the last two calls' when the
    timing ran on two draws (:data:`PLANNED_DRAWS`), every call's when it ran on one.
    The pair's and the random sample's come from the worker (a pair must carry two
    different draws: :func:`kept_outputs_problem`)."""
    timing = _final_timing(m)
    draws = timing.get("input_draws") if timing else None
    out = []
    for key, what in KEPT:
        if key in m:
            if draws == 1:
                draw = 0
            elif draws == 2 and key in PLANNED_DRAWS:
                draw = PLANNED_DRAWS[key]
            else:
                draw = m.get(f"{key}_draw", 0)
                draw = draw if draw in (0, 1) else 0
            out.append((what, m[key], list(m.get(f"{key}_meta") or []), draw))
    return out


def kept_outputs_problem(m: dict[str, Any]) -> str | None:
    """What is wrong with the set of kept outputs a worker sent, or None: after a
    finished two-draw timing both last calls' outputs must be there (an honest worker
    always sends them; a candidate that dropped one from the message would have only the
    call it answers right judged), and the device-timed pair, when sent, must be labelled
    with the two different draws the wrapper only pairs (a relabelled pair could compare
    a remembered answer with the draw it was computed for)."""
    timing = _final_timing(m)
    if timing and timing.get("input_draws") == 2:
        gone = [key for key in PLANNED_DRAWS if key not in m]
        if gone:
            return (
                "the worker's message lacks the kept output of "
                + " and ".join(dict(KEPT)[k] for k in gone)
                + " (the timing ran on two input draws, and both last calls are always kept)"
            )
    if "timed_pair_first" in m and "timed_pair_second" in m:
        draws = {m.get("timed_pair_first_draw"), m.get("timed_pair_second_draw")}
        if draws != {0, 1}:
            return (
                "the device-timed pair the worker sent is not labelled with two different "
                f"input draws ({sorted(map(str, draws))}): the wrapper pairs only calls on "
                "different draws"
            )
    return None


def final_draw(m: dict[str, Any]) -> int:
    """The draw the shared input tensors hold once timing is over: draw 1 after a
    two-draw timing of a non-mutating op (its last call holds draw 1 in them), else 0."""
    timing = _final_timing(m)
    two = bool(timing) and timing.get("input_draws") == 2 and not timing.get("mutating")
    return 1 if two else 0


def returns_alias(overload: Any) -> bool:
    """Whether the op's schema lets an output alias an input (``Tensor(a)``: views such
    as ``t``, ``transpose``, ``select``, and ``reshape`` or ``contiguous``, which may)."""
    return any(r.alias_info is not None for r in overload._schema.returns)


def judge_timed_output(
    case: Case,
    outputs: Any,
    output_meta: list[dict[str, Any]],
    device: str,
    options: JudgeOptions,
    expectations: Expectations | None = None,
    what: str = "a timed call",
    draw: int = 0,
    held: int | None = None,
) -> Verdict | None:
    """None when a timed call's output (``what`` it was, on input ``draw``) passes (or
    cannot be judged: random and uninitialised-output ops, inputs not runnable here),
    else ``cheat``.

    ``held``: the draw the shared input tensors hold at the end (:func:`final_draw`). A
    view's bytes are its input's, which later draws rewrite, so an op whose schema lets
    outputs alias inputs also passes when its output is right for ``held``: before this,
    an honest ``aten.t`` failed as ``cheat`` whenever a kept call had held the other draw
    (remembering buys nothing on such ops: a view costs nothing to make)."""
    overload = get_overload(case.op)
    if is_random(overload) or overload._schema.name.removeprefix("aten::") in UNINITIALIZED_OPS:
        return None
    problems = guard_mod.output_problems_from_meta(output_meta)
    if problems:
        return Verdict("failed", "cheat", f"{what} returned " + "; ".join(problems))
    draws = [draw]
    if held is not None and held != draw and returns_alias(overload):
        draws.append(held)
    res = None
    for d in draws:
        seed = timing_seeds(case)[d]
        try:
            exp = (expectations or {}).get(seed) or expect(case, overload, device, seed)
        except NotRunnableHere:
            return None
        got = compare_to_expected(
            exp, outputs, output_meta, compare_kwargs(case, options, exp), meta_only=exp.undefined
        )
        if got.ok:
            return None
        res = res or got
    assert res is not None
    return Verdict(
        "failed",
        "cheat",
        f"the output of {what} is not the reference's for the same inputs (correct "
        f"while checked, not while timed; inputs: timing draw {draw} of 0-1, each call's "
        f"chosen at random, so a remembered answer fails too): {res.message}",
        max_abs_err=res.max_abs_err,
        max_rel_err=res.max_rel_err,
    )
