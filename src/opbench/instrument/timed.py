"""What a worker keeps of a candidate's timed calls for the harness: the last two outputs
and one chosen at random among all timed calls, each with the input draw it saw.

The harness judges both against the reference for the input draw each one saw
(:mod:`opbench.judge.timed_output`, :mod:`opbench.programs.judge`;
:mod:`opbench.judge.timing_inputs` for the draws): a candidate that computes for the
correctness trials and stops once it is timed fails, so does one that stops for most
timed calls but not the last, and so does one that returns an answer it remembered.

Why the last *two*: the timing ends with two calls in the same tensors, holding draw 0
and then draw 1 (:func:`opbench.judge.timing._last_calls`). A kernel that hands back the
answer it stored for those objects or addresses returns the same bytes for both, so one
of the two is wrong, whichever draw it stored. Judging only the last call relied on the
stored answer being draw 0's; on a GPU the side-stream check recomputes on the working
tensors at a random draw just before, and the H100 passed such kernels (stop 29).
Nothing here decides anything; the wrapper records and the worker sends.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from typing import Any

from opbench.instrument import tensors

__all__ = ["KEPT", "keeping_timed", "timed_outputs"]

#: The message keys of the kept outputs and what each is, in the order they are judged
#: (the worker writes them here, the harness reads them in judge/timed_output.py).
KEPT = (
    ("timed_output", "the last timed call"),
    ("timed_previous", "the timed call before the last"),
    ("timed_sample", "a timed call drawn at random"),
)


def keeping_timed(
    fn: Callable[..., Any],
    kept: list[Any],
    draw_of: Callable[[Any, Any], int] | None = None,
) -> Callable[..., Any]:
    """``fn`` keeping, in ``kept``, its latest two results and one of all its results
    chosen uniformly at random (reservoir sampling: call ``i`` replaces the sample with
    probability ``1/i``), each with the input draw its call saw (``draw_of(args,
    kwargs)``, asked right after the call; 0 without it). The choice is drawn after the
    call returned, from a generator seeded by the OS, so a kernel cannot know whether the
    call it is making will be kept; a kernel lazy on a fraction ``f`` of its timed calls
    is caught with probability about ``f`` by the sample, and always if the last call is
    lazy. The draw and the lookup cost well under a microsecond of the candidate's host
    time (no system call, one dictionary lookup).
    """
    rng = random.Random(os.urandom(16))
    calls = 0

    def call(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        result = fn(*args, **kwargs)
        calls += 1
        last = (result, draw_of(args, kwargs) if draw_of is not None else 0)
        previous = kept[0] if kept else None
        sample = last if rng.random() * calls < 1.0 else (kept[2] if kept else None)
        kept[:] = [last, previous, sample]
        return result

    call._schema = getattr(fn, "_schema", None)  # type: ignore[attr-defined]
    return call


def timed_outputs(kept: list[Any], device: str) -> dict[str, Any]:
    """The kept outputs as plain data for the harness (nothing when no call was made):
    ``timed_output`` (the last call's), ``timed_previous`` (the one before, when there
    was one) and ``timed_sample`` (when the call drawn is neither of those); each with
    ``*_meta`` and ``*_draw`` (which input draw it saw)."""
    if not kept:
        return {}
    tensors.sync(device)
    out: dict[str, Any] = {}
    sent: list[Any] = []
    for (key, _), entry in zip(KEPT, kept):
        if entry is None or any(entry is e for e in sent):
            continue
        sent.append(entry)
        result, draw = entry
        out[key] = tensors.cpu_outputs(result)
        out[f"{key}_meta"] = tensors.output_meta(result)
        out[f"{key}_draw"] = draw
    return out
