"""What a worker keeps of a candidate's timed calls for the harness: the last two outputs,
two consecutive device-timed ones on different input draws, and one chosen at random
among all timed calls, each with the input draw it saw.

The harness judges each against the reference for the input draw its call saw
(:mod:`opbench.judge.timed_output`, :mod:`opbench.programs.judge`;
:mod:`opbench.instrument.timing_inputs` for the draws): a candidate that computes for the
correctness trials and stops once it is timed fails, so does one that stops for most
timed calls but not the last, and so does one that returns an answer it remembered.

Why the last *two*: the timing ends with two calls in the same tensors, holding draw 0
and then draw 1 (:func:`opbench.instrument.timing_loops.last_calls`). A kernel that hands back the
answer it stored for those objects or addresses returns the same bytes for both, so one
of the two is wrong, whichever draw it stored. Judging only the last call relied on the
stored answer being draw 0's; on a GPU the side-stream check recomputes on the working
tensors at a random draw just before, and the H100 passed such kernels (2026-11-25,
before f8e334e).
Nothing here decides anything; the wrapper records and the worker sends.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from typing import Any

from opbench.instrument import tensors

__all__ = ["KEPT", "REQUIRED", "DrawLookup", "keeping_timed", "output_bytes", "timed_outputs"]

#: The message keys of the kept outputs and what each is, in the order they are judged
#: (the worker writes them here, the harness reads them in judge/timed_output.py).
KEPT = (
    ("timed_output", "the last timed call"),
    ("timed_previous", "the timed call before the last"),
    ("timed_pair_first", "the first of two consecutive device-timed calls on different draws"),
    ("timed_pair_second", "the second of two consecutive device-timed calls on different draws"),
    ("timed_sample", "a timed call drawn at random"),
)


class DrawLookup:
    """Which input draw a timed call saw, and which phase of the timing it was in, for
    :func:`keeping_timed`: ``ready`` goes to :func:`opbench.instrument.timing.time_pair`
    as ``inputs_ready``, which hands it the timing's
    :class:`~opbench.instrument.timing_inputs.TimingInputs` before the first call (the
    latest one counts when one wrapper serves several timings)."""

    def __init__(self) -> None:
        self._inputs: list[Any] = []
        self.ready = self._inputs.append

    def draw_of(self, args: Any, kwargs: Any) -> int:
        return self._inputs[-1].draw_of(args, kwargs) if self._inputs else 0

    def phase_of(self) -> str:
        return self._inputs[-1].phase if self._inputs else "other"


def keeping_timed(
    fn: Callable[..., Any],
    kept: list[Any],
    draw_of: Callable[[Any, Any], int] | None = None,
    phase_of: Callable[[], str] | None = None,
) -> Callable[..., Any]:
    """``fn`` keeping, in ``kept`` (in :data:`KEPT`'s order), its latest two results, one
    pair of consecutive device-timed calls, and one of all its results chosen uniformly
    at random (reservoir sampling: call ``i`` replaces the sample with probability
    ``1/i``), each with the input draw its call saw (``draw_of(args, kwargs)``, asked
    right after the call; 0 without it). The choices are drawn after the call returned,
    from a generator seeded by the OS, so a kernel cannot know whether the call it is
    making will be kept; a kernel lazy on a fraction ``f`` of its timed calls is caught
    with probability about ``f`` by the sample, and always if the last call is lazy.

    **The device-timed pair** (``phase_of() == "device"``: the calls whose CUDA-event
    times make the device speedup): among the consecutive device-timed calls whose input
    draws differ, one pair drawn uniformly. A kernel lazy only there (it can tell those
    calls by their reused input tensors, and the host-timed rounds by fresh copies) was
    caught only when the uniform sample happened to land among them, a few percent of
    all calls next to the thousands of host-timed ones; a lazy or remembered answer
    returns the same bytes for both calls of the pair, and one of the two draws makes
    them wrong. The draw and the lookups cost well under a microsecond of the
    candidate's host time (no system call, a dictionary lookup or two).
    """
    rng = random.Random(os.urandom(16))
    calls = pairs = 0
    before: tuple[Any, int] | None = None  # the previous device-timed call

    def call(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls, pairs, before
        result = fn(*args, **kwargs)
        calls += 1
        last = (result, draw_of(args, kwargs) if draw_of is not None else 0)
        previous = kept[0] if kept else None
        first, second = (kept[2], kept[3]) if kept else (None, None)
        sample = last if rng.random() * calls < 1.0 else (kept[4] if kept else None)
        if phase_of is not None and phase_of() == "device":
            if before is not None and before[1] != last[1]:
                pairs += 1
                if rng.random() * pairs < 1.0:
                    first, second = before, last
            before = last
        else:
            before = None
        kept[:] = [last, previous, first, second, sample]
        return result

    call._schema = getattr(fn, "_schema", None)  # type: ignore[attr-defined]
    return call


#: The kept outputs the harness requires (after a two-draw timing); the others go along
#: while the message has room (:func:`timed_outputs`).
REQUIRED = ("timed_output", "timed_previous")


def output_bytes(obj: Any) -> int:
    """The bytes of the tensors in an output (a tensor, or lists, tuples and dicts)."""
    from opbench.suites.materialize import tensors_in

    return sum(t.numel() * t.element_size() for t in tensors_in(obj))


def timed_outputs(kept: list[Any], device: str, room: int | None = None) -> dict[str, Any]:
    """The kept outputs as plain data for the harness (nothing when no call was made):
    ``timed_output`` (the last call's), ``timed_previous`` (the one before, when there
    was one), ``timed_pair_first`` and ``timed_pair_second`` (the device-timed pair, when
    there was one) and ``timed_sample`` (when the call drawn is none of those); each
    once, with ``*_meta`` and ``*_draw`` (which input draw it saw).

    ``room``: the bytes the message may still carry (a program's outputs can be GiBs, and
    a worker message is capped). The last two calls' outputs always go; the pair (both or
    neither) and the sample only while they fit, so a problem that ran with two kept
    outputs before still runs."""
    if not kept:
        return {}
    tensors.sync(device)
    entries = dict(zip((key for key, _ in KEPT), kept))
    left = (
        None
        if room is None
        else room - sum(output_bytes(entries[k][0]) for k in REQUIRED if entries.get(k) is not None)
    )
    if left is not None:
        pair = [entries.get("timed_pair_first"), entries.get("timed_pair_second")]
        need = sum(output_bytes(e[0]) for e in pair if e is not None)
        if need > left:
            entries["timed_pair_first"] = entries["timed_pair_second"] = None
        else:
            left -= need
        sample = entries.get("timed_sample")
        if sample is not None and output_bytes(sample[0]) > left:
            entries["timed_sample"] = None
    out: dict[str, Any] = {}
    sent: list[Any] = []
    for key, _ in KEPT:
        entry = entries.get(key)
        if entry is None or any(entry is e for e in sent):
            continue
        sent.append(entry)
        result, draw = entry
        out[key] = tensors.cpu_outputs(result)
        out[f"{key}_meta"] = tensors.output_meta(result)
        out[f"{key}_draw"] = draw
    return out
