"""The worker's report on a candidate, as plain data (sent through
:mod:`opbench.run.protocol`, read back with ``weights_only`` loading).

Raw facts only: what came back, what the inputs look like after the call, what the
observers saw. The harness (:func:`opbench.judge.evaluate.judge_report`) compares them
with its own copies of the inputs and its own references.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

__all__ = ["CandidateReport", "TrialPlan", "TrialResult"]


@dataclass
class TrialPlan:
    """The seeds the harness asks the worker to run: the trials, then (optionally) a
    re-drawn seed whose inputs make a trivial answer fail, and a repeat of the first trial
    run right after trial ``repeat_after`` (the harness draws that position at random: a
    kernel that counts its calls and alternates its answers cannot know which call is
    compared with which; at a fixed position, after the last trial, one that flipped
    every other call repeated its first answer exactly)."""

    seeds: list[int]
    redraw: list[bool] = field(default_factory=list)
    repeat: bool = True
    redraw_seeds_tried: list[int] = field(default_factory=list)
    repeat_after: int = -1  # -1: after the last trial

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrialPlan:
        return cls(
            seeds=[int(s) for s in d["seeds"]],
            redraw=[bool(r) for r in d.get("redraw") or []],
            repeat=bool(d.get("repeat", True)),
            redraw_seeds_tried=[int(s) for s in d.get("redraw_seeds_tried") or []],
            repeat_after=int(d.get("repeat_after", -1)),
        )


@dataclass
class TrialResult:
    """What happened when the candidate ran on one input set (plain data only).

    ``output_meta``/``target_meta``/``input_meta``: shapes, strides, dtypes, devices,
    storage addresses and Python object ids (for "returned self" and aliasing);
    ``inputs_digest_before``/``inputs_digest``: SHA-256 of each input's storage span
    (holes between its elements included) before and after the call, taken by the
    worker; ``elements_digest``: of the elements the input reaches, after the call (the
    harness compares it with its own copy's: holes hold whatever memory the allocator
    gave, so only the worker can see them before and after); ``inputs_after``: the span
    after the call, on the CPU, when it changed and is small enough to send; ``calls``: what the
    dispatch recorder saw on the calling thread; ``observed``: what the global observer
    saw (:class:`opbench.instrument.observer.ObservedCalls`); ``tamper``: what changed
    in the worker's process during the call (:mod:`opbench.instrument.integrity`).
    """

    seed: int
    status: str = "ok"  # ok | error | not_implemented | skipped
    message: str = ""
    error_type: str | None = None
    traceback: str | None = None
    outputs: Any = None
    output_meta: list[dict[str, Any]] = field(default_factory=list)
    target_meta: list[dict[str, Any]] = field(default_factory=list)
    target_after: list[dict[str, Any]] = field(default_factory=list)
    input_meta: dict[str, dict[str, Any]] = field(default_factory=dict)
    input_meta_after: dict[str, dict[str, Any]] = field(default_factory=dict)
    inputs_after: dict[str, Any] = field(default_factory=dict)
    inputs_digest: dict[str, str] = field(default_factory=dict)
    inputs_digest_before: dict[str, str] = field(default_factory=dict)
    elements_digest: dict[str, str] = field(default_factory=dict)
    written_after: dict[str, Any] = field(default_factory=dict)
    calls: list[tuple[str, bool, int]] = field(default_factory=list)
    observed: dict[str, Any] = field(default_factory=dict)
    tamper: list[str] = field(default_factory=list)
    guard: str = "on"  # on | skipped
    elapsed_s: float = 0.0
    redraw: bool = False


# Fields shaped like run/store.TestResult's, kept apart: what a worker reports (no
# verdict), where that is the harness's stored row (with one).
@dataclass
class CandidateReport:
    """The worker's account of a candidate on one case; judged by
    :func:`opbench.judge.evaluate.judge_report`. ``repeat`` is a second run of the
    first trial's inputs (determinism)."""

    op: str
    test_id: str
    trials: list[TrialResult] = field(default_factory=list)
    repeat: TrialResult | None = None
    error: str | None = None
    skipped: str | None = None
    not_implemented: str | None = None
    redraw_seeds_tried: list[int] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)
    #: what the process-wide observer saw over the whole test (all trials and the repeat)
    observed: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_plain(cls, d: Any) -> CandidateReport:
        """Rebuild from the plain dict a worker sent (``opbench.run.protocol.to_plain``)."""
        if isinstance(d, CandidateReport):
            return d
        if not isinstance(d, dict):
            raise TypeError(f"report is a {type(d).__name__}, not a dict")
        names = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in names}
        kw["trials"] = [_trial(t) for t in kw.get("trials") or []]
        if kw.get("repeat") is not None:
            kw["repeat"] = _trial(kw["repeat"])
        return cls(**kw)


def _trial(t: Any) -> TrialResult:
    if isinstance(t, TrialResult):
        return t
    if not isinstance(t, dict):
        raise TypeError("malformed trial in report")
    names = {f.name for f in fields(TrialResult)}
    tk = {k: v for k, v in t.items() if k in names}
    tk["calls"] = [tuple(c) for c in tk.get("calls") or []]
    return TrialResult(**tk)
