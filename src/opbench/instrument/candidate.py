"""Running a candidate kernel on one case's trials, in the WORKER.

For each seed of the harness's :class:`~opbench.instrument.records.TrialPlan`: build
fresh inputs, run the kernel under both observers (the thread's dispatch recorder and
the process-wide execution window, :mod:`opbench.instrument.observer`), then record
plain data: the outputs copied to the CPU, their layouts and object ids, each input's
storage as it is after the call, and what changed in the process
(:mod:`opbench.instrument.integrity`). Nothing here compares anything with a
reference or decides whether a result is right: the harness does that with its own
copies of the inputs (:func:`opbench.judge.evaluate.judge_report`).

The aten backend's kernel is the judged ``OpOverload`` itself: PyTorch by definition,
so it runs without the recorders (``guard: skipped``); the worker says so from the
``--backend`` spec, never from the kernel object (a kernel file may export the overload).
"""

from __future__ import annotations

import contextlib
import time
import traceback
from collections import Counter
from collections.abc import Callable
from typing import Any

import torch

from opbench.instrument import tensors
from opbench.instrument.integrity import Fingerprint
from opbench.instrument.observer import DispatchRecorder, ExecutionWindow, scoped
from opbench.instrument.records import CandidateReport, TrialPlan, TrialResult
from opbench.spec.call import is_written, targets, walk_inputs, written_args
from opbench.spec.ops import get_overload
from opbench.spec.reference import is_reference_kernel
from opbench.suites.case import Case, derive_seed

__all__ = ["MAX_INPUT_ELEMENTS_SENT", "default_plan", "run_candidate"]

#: Inputs up to this many storage elements are sent back whole after the call (the
#: judge then counts changed elements); larger ones as a SHA-256 digest only.
MAX_INPUT_ELEMENTS_SENT = 1 << 22

_perf = time.perf_counter


def default_plan(case: Case, trials: int) -> TrialPlan:
    """The case's seed, then ``trials - 1`` derived ones, then a repeat of the first
    (what the harness asks for when no re-draw is needed)."""
    return TrialPlan(seeds=[derive_seed(case.seed, i) for i in range(max(1, trials))])


def _short_tb(e: BaseException) -> str:
    lines = traceback.format_exception(type(e), e, e.__traceback__)
    return "".join(lines[-6:])[-3000:]


def run_trial(
    case: Case,
    kernel: Callable[..., Any],
    overload: torch._ops.OpOverload,
    device: str,
    seed: int,
    *,
    guard_on: bool,
    window: ExecutionWindow | None = None,
) -> TrialResult:
    """One trial in the worker: build inputs, call, record (never raises for the kernel).

    ``window``: the test's open call observer, paused while the worker builds inputs; it
    records the call (marked as the candidate's) and the reading of its results (a
    thread that fills the output after the kernel returned is seen)."""
    from opbench.suites.inputs import NotRunnable
    from opbench.suites.materialize import materialize

    tr = TrialResult(seed=seed, guard="on" if guard_on else "skipped")
    try:
        args, kwargs = materialize(case, device, seed)
    except NotRunnable as e:
        tr.status, tr.message = "skipped", str(e.reason)
        return tr
    inputs = walk_inputs(args, kwargs)
    tr.input_meta = {p: tensors.meta(t) for p, _, t in inputs}
    before = {p: tensors.digest(tensors.snapshot(t)) for p, _, t in inputs}
    tgts = targets(overload, args, kwargs)
    tr.target_meta = [tensors.meta(t) if isinstance(t, torch.Tensor) else {} for t in tgts]
    recorder = DispatchRecorder([t for t in tgts if isinstance(t, torch.Tensor)])
    observing = guard_on and window is not None
    result: Any = None
    t0 = _perf()
    try:
        with window.resume() if observing else contextlib.nullcontext():
            try:
                with scoped(window) if observing else contextlib.nullcontext():
                    with recorder if guard_on else contextlib.nullcontext():
                        result = kernel(*args, **kwargs)
                tensors.sync(device)
            finally:
                tr.elapsed_s = _perf() - t0
                _record(tr, result, inputs, tgts, overload, before)
    except NotImplementedError as e:
        tr.status, tr.message = "not_implemented", str(e) or "NotImplementedError"
    except Exception as e:
        tr.status = "error"
        tr.error_type = type(e).__name__
        tr.message = str(e)[:2000]
        tr.traceback = _short_tb(e)
    finally:
        counts = Counter((c.name, c.into_target) for c in recorder.calls)
        tr.calls = [(n, into, k) for (n, into), k in sorted(counts.items())]
    if tr.status != "ok":
        tr.outputs = None
        tr.output_meta = []
    return tr


def _record(
    tr: TrialResult,
    result: Any,
    inputs: list[tuple[str, str, torch.Tensor]],
    tgts: list[Any],
    overload: torch._ops.OpOverload,
    before: dict[str, str],
) -> None:
    """Outputs, targets and inputs as they are after the call, as plain data.

    Every input's digest after the call goes back (the judge compares it with its own
    copy's); the input itself only when it is small and the worker saw it change, so
    the judge can say how many elements changed (whole inputs for every trial doubled
    the size of a report for nothing)."""
    tr.outputs = tensors.cpu_outputs(result)
    tr.output_meta = tensors.output_meta(result)
    tr.target_after = [tensors.meta(t) if isinstance(t, torch.Tensor) else {} for t in tgts]
    written = written_args(overload)
    target_ids = {id(t) for t in tgts}
    for p, top, t in inputs:
        try:
            tr.input_meta_after[p] = tensors.meta(t)
            after = tensors.snapshot(t)
        except RuntimeError as e:  # storage resized away under the view
            tr.input_meta_after[p] = {"unreadable": f"{type(e).__name__}: {e}"}
            continue
        tr.inputs_digest[p] = tensors.digest(after)
        tr.inputs_digest_before[p] = before.get(p, "")
        tr.elements_digest[p] = tensors.elements_digest(t)
        if tr.inputs_digest[p] != before.get(p) and after.numel() <= MAX_INPUT_ELEMENTS_SENT:
            tr.inputs_after[p] = after
        if id(t) not in target_ids and is_written(top, overload, written):
            tr.written_after[p] = tensors.cpu_outputs(t)


def run_candidate(
    case: Case,
    kernel: Callable[..., Any],
    device: str,
    options: Any,
    plan: TrialPlan | None = None,
    *,
    fingerprint: Fingerprint | None = None,
    guard: bool | None = None,
    after_call: Callable[[], Any] | None = None,
) -> CandidateReport:
    """Run ``kernel`` on the plan's seeds and report what it did (no verdict).

    Never raises for a misbehaving kernel: its exceptions are recorded in the report.
    ``options`` is the run's :class:`opbench.judge.evaluate.JudgeOptions`; ``guard``:
    whether to observe the calls (the worker: unless the backend is ``aten``; None, for
    in-process use: unless the kernel is the judged overload itself). ``after_call``:
    called after every trial (the worker's census of threads and processes).
    """
    overload = get_overload(case.op)
    plan = plan or default_plan(case, options.trials)
    guard_on = guard if guard is not None else not is_reference_kernel(kernel, overload)
    report = CandidateReport(
        op=case.op, test_id=case.test_id, redraw_seeds_tried=list(plan.redraw_seeds_tried)
    )
    redraw = plan.redraw + [False] * (len(plan.seeds) - len(plan.redraw))
    # one observer window for the whole test (opening one costs ~1 ms; per trial it was
    # a fifth of a small test's time), paused while the worker builds inputs: run_trial
    # resumes it for each call and the reading of its results
    window = ExecutionWindow() if guard_on else None
    with contextlib.ExitStack() as observed:
        if window is not None:
            observed.enter_context(window)
            observed.enter_context(window.pause())
        repeat_after = plan.repeat_after if 0 <= plan.repeat_after < len(plan.seeds) else -1
        last = len(plan.seeds) - 1
        for i, (seed, is_redraw) in enumerate(zip(plan.seeds, redraw)):
            tr = run_trial(case, kernel, overload, device, seed, guard_on=guard_on, window=window)
            if after_call is not None:
                after_call()
            tr.redraw = is_redraw
            report.trials.append(tr)
            if tr.status != "ok":
                _summarise(report, tr)
                break
            if (
                plan.repeat
                and options.check_determinism
                and i == (last if repeat_after < 0 else repeat_after)
            ):
                rep = run_trial(
                    case, kernel, overload, device, plan.seeds[0], guard_on=guard_on, window=window
                )
                rep.inputs_after = {}  # the first trial's are enough; the repeat is for outputs
                report.repeat = rep
    if window is not None:
        report.observed = window.result.to_dict()
    if fingerprint is not None and guard_on:
        # once, after the test's last call: a change that stays is seen here; the
        # observers catch calls made while it lasted
        (report.repeat or report.trials[-1]).tamper = fingerprint.changes()
    return report


def _summarise(report: CandidateReport, tr: TrialResult) -> None:
    if tr.status == "error":
        report.error = f"{tr.error_type}: {tr.message}"
    elif tr.status == "skipped":
        report.skipped = tr.message
    elif tr.status == "not_implemented":
        report.not_implemented = tr.message
