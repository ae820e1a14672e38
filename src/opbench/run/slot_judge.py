"""A slot's planning and judging in processes of its own (on GPUs by default:
:func:`~opbench.run.judge_template.plan_where`).

With threads, every slot plans (draws inputs, runs eager and the float64 reference) and
judges (reads the worker's answer, compares) in the harness's one interpreter. On 2 x H100
the OpInfo suite then took longer on 2 GPUs than on 1 (147.5 s of tests against 124.8 s,
``results/scaling-opinfo-h100x2.md``), with the planning thread on each slot's critical
path (``results/harness-profile-opinfo-h200.md``). Here a slot's tests are planned and
judged in processes of its own, forks of a template that imported opbench and torch
once (:mod:`opbench.run.judge_template`; never a kernel, so they are as trusted as the
harness), each with a fresh CUDA state: the process that planned a test keeps its
expectations, which can be hundreds of megabytes, and receives the worker's answer as the
bytes the worker wrote.
What crosses to the harness is a plan (seeds) and a verdict.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from opbench.run import judge_template
from opbench.run.warm_up import warm_up
from opbench.run.worker_process import Outcome, read_result
from opbench.suites.case import Case

__all__ = ["JudgingProcessDied", "SlotJudge"]

#: Expectations a judging process keeps for tests planned but not yet judged: the test
#: in hand and those planned ahead. One evicted (the run went another way) is computed
#: again when its answer comes, as a thread-planned test's missing expectations are.
KEPT_EXPECTATIONS = 8


class JudgingProcessDied(RuntimeError):
    """A slot's judging process died on one test twice (the second time alone, on a new
    process): that test's own ``judge_error``; the slot goes on with a new process."""


class SlotJudge:
    """One slot's judging processes. :meth:`ahead` and :meth:`get` as
    :class:`~opbench.run.plan_ahead.PlansAhead`'s (``get`` gives ``(plan, None)``: the
    expectations stay in the process that planned the test), and :meth:`judge` for the
    worker's answer, sent to that same process.

    ``depth`` processes (:func:`~opbench.run.plan_ahead.plan_depth`,
    ``OPBENCH_PLAN_AHEAD``, default 1) take the slot's tests in turn, so up to ``depth``
    tests are planned while the worker runs one: where one process's planning and judging
    take longer than the worker's test (the OpInfo suite on 4 x H100: about 20 ms a test
    against the worker's 8, 2026-11-28), more processes keep the worker fed. Each
    process serves its requests in order. Where a process dies, it is replaced and the
    request made again alone; a second death raises :class:`JudgingProcessDied` for that
    test."""

    def __init__(
        self, device: str, options: Any, *, ahead: bool, threads: int = 1,
        warm: tuple[str, ...] = (),
    ) -> None:  # fmt: skip
        """``warm``: what each process loads as it starts, before any test
        (:data:`~opbench.run.warm_up.WARM_BY_SUITE`)."""
        from opbench.run.plan_ahead import plan_depth

        self.device, self._options, self._threads = device, options, threads
        self._warm = tuple(warm)
        self._ahead = ahead
        self.depth = plan_depth()
        #: tests planned ahead: their process and its answer to come
        self._pending: dict[str, tuple[int, Any]] = {}
        #: tests planned and not yet judged: the process that keeps their expectations
        self._where: dict[str, int] = {}
        self._turn = 0
        self._processes = [self._start() for _ in range(self.depth)]

    def _start(self) -> _Process:
        """A new judging process (a fork of the template, or spawned once the template
        was given up: :mod:`~opbench.run.judge_template`), asked to start at once,
        beside the worker's start rather than at the first plan."""
        from concurrent.futures import ProcessPoolExecutor

        ctx = judge_template.context(self.device, self._warm)
        forked = judge_template.forked(ctx)
        pool = ProcessPoolExecutor(
            1,
            mp_context=ctx,
            initializer=_start_judge,
            initargs=(self.device, self._threads, self._options, self._warm, forked),
        )
        try:
            return _Process(pool, forked, pool.submit(_ready))
        except Exception as e:  # noqa: BLE001 - the template could not fork: spawn
            pool.shutdown(wait=False, cancel_futures=True)
            if not forked:
                raise
            judge_template.give_up(f"forking a judging process failed: {e}")
            return self._start()

    def _next(self) -> int:
        """The process whose turn it is to plan a test."""
        i = self._turn % self.depth
        self._turn += 1
        return i

    def _call(self, what: str, case: Case, i: int, submit: Any) -> Any:
        """The answer of ``submit(pool)`` (a request to process ``i``); if that process
        died (or its pool broke before the request), a new one and the request again,
        alone. A fork of the template that died before it could start (its CUDA unusable)
        is the template's last: processes are spawned from then on
        (:func:`~opbench.run.judge_template.give_up`)."""
        from concurrent.futures.process import BrokenProcessPool

        try:
            return submit(self._processes[i].pool).result()
        except BrokenProcessPool:
            pass
        if self._processes[i].never_started():
            judge_template.give_up(f"a forked judging process on {self.device} could not "
                                   f"start: {self._processes[i].ready.exception()}")  # fmt: skip
        self._restart(i)  # which request killed it is unknown: this one again, alone
        try:
            return submit(self._processes[i].pool).result()
        except BrokenProcessPool:
            self._restart(i)
            raise JudgingProcessDied(
                f"the judging process on {self.device} died {what} {case.test_id}, twice "
                "(the second time alone on a new process)"
            ) from None

    def _restart(self, i: int) -> None:
        for test_id in [t for t, (j, _) in self._pending.items() if j == i]:
            del self._pending[test_id]
        self._processes[i].pool.shutdown(wait=False, cancel_futures=True)
        self._processes[i] = self._start()

    def ahead(self, cases: Case | list[Case]) -> None:
        """Start planning the next tests (only without timing: planning beside measured
        calls would share the CPU or GPU with them)."""
        if not self._ahead:
            return
        from concurrent.futures.process import BrokenProcessPool

        for case in ([cases] if isinstance(cases, Case) else cases)[: self.depth]:
            if case.test_id not in self._pending:
                i = self._next()
                try:
                    self._pending[case.test_id] = (i, self._processes[i].pool.submit(_plan, case))
                except BrokenProcessPool:  # planned when asked for, on a new process
                    return

    def get(self, case: Case) -> tuple[Any, None]:
        """``case``'s trial plan (its expectations stay in the process that made it)."""
        found = self._pending.pop(case.test_id, None)
        if found is None:
            for _, stale in self._pending.values():
                stale.cancel()
            self._pending.clear()
            i = self._next()
        else:
            i = found[0]
        plan = self._call("planning", case, i,
                          _Once(found[1] if found else None, _plan, case))  # fmt: skip
        self._where[case.test_id] = i
        return plan, None

    def judge(self, case: Case, outcome: Outcome, **fields: Any) -> tuple[Any, str]:
        """The test's result from the worker's ``outcome`` (a result as the bytes it
        wrote, ``run_case(raw=True)``), and the outcome's kind as judged: ``crash`` where
        the answer could not be read or says the CUDA context is broken (the caller then
        kills that worker). Judged in the process that planned the test (one that lost
        its expectations computes them again). ``fields``:
        :func:`~opbench.run.outcome_verdict.judge_outcome`'s ``backend``, ``worker``,
        ``unit_info`` and ``scan``."""
        i = self._where.pop(case.test_id, 0)
        args = (case, outcome.kind, outcome.raw, outcome.detail, outcome.stderr_tail, fields)
        return self._call("judging", case, i, _Once(None, _judge, *args))

    def start_report(self, t0_unix: float) -> dict[str, Any] | None:
        """How the slot's first judging process started, in seconds from ``t0_unix`` (the
        run phase's start; negative: before it): the template's launch and the end of
        its warm-up (with each warm-up step's seconds), the fork's own start steps and
        its first answer. None while it has not answered (never waits)."""
        ready = self._processes[0].ready
        if not ready.done() or ready.exception() is not None:
            return None
        got = ready.result()
        report: dict[str, Any] = {"forked": self._processes[0].forked,
                                  "ready_s": round(got["ready_at"] - t0_unix, 2),
                                  "start_s": got["start_s"]}  # fmt: skip
        template = dict(got.get("template") or {})  # a copy: the answer is kept as sent
        launched = judge_template.started_at()
        if "done_at" in template:
            report["template_done_s"] = round(template.pop("done_at") - t0_unix, 2)
            report["template_steps_s"] = template
        if launched is not None and report["forked"]:
            report["template_launched_s"] = round(launched - t0_unix, 2)
        return report

    def close(self) -> None:
        for process in self._processes:
            process.pool.shutdown(wait=True, cancel_futures=True)


@dataclass
class _Process:
    """One judging process: its pool of one, whether it is a fork of the template, and
    the answer to its start (:func:`_ready`)."""

    pool: Any
    forked: bool
    ready: Any

    def never_started(self) -> bool:
        """A fork whose start failed (it never answered :func:`_ready`)."""
        return self.forked and self.ready.done() and self.ready.exception() is not None


class _Once:
    """A request for :meth:`SlotJudge._call`: the future already submitted (a plan made
    ahead), else ``fn(*args)`` submitted to the pool it is given; a second call always
    submits anew (the first pool died)."""

    def __init__(self, future: Any, fn: Any, *args: Any) -> None:
        self._future, self._fn, self._args = future, fn, args

    def __call__(self, pool: Any) -> Any:
        future, self._future = self._future, None
        return future if future is not None else pool.submit(self._fn, *self._args)


# -- in the judging process ------------------------------------------------------------
_STATE: dict[str, Any] = {}


def _start_judge(
    device: str, threads: int, options: Any, warm: tuple[str, ...] = (), forked: bool = False
) -> None:
    """The process's start: the GPUs the template hid (``forked``), its torch threads,
    its GPU, the imports of planning and judging and the ``warm`` entries
    (:func:`~opbench.run.warm_up.warm_up`; a fork has them from the template
    where they are the template's), so the first test waits for none of them. Each
    step's seconds are kept for :func:`_ready`'s report."""
    import time

    steps: dict[str, float] = {}
    t0 = time.perf_counter()

    def step(name: str) -> None:
        nonlocal t0
        steps[name] = round(time.perf_counter() - t0, 3)
        t0 = time.perf_counter()

    if forked:
        judge_template.child_start()
        step("child_start")
    import torch

    from opbench.instrument.tensors import bind_device

    torch.set_num_threads(max(1, threads))
    bind_device(device)
    step("device")
    import opbench.judge.evaluate  # noqa: F401
    import opbench.run.outcome_verdict  # noqa: F401

    warm_up(warm)  # a fork's are loaded (lru_cache): nothing to do
    step("imports")
    _STATE.update(device=device, options=options, kept=OrderedDict(), start_s=steps)


def _ready() -> dict[str, Any]:
    """Submitted first, so the process starts with the slot; answers how its start went:
    its own steps (seconds), the template's warm-up (where it is a fork of one:
    :data:`~opbench.run.judge_preload.TIMES`) and when it answered (Unix time)."""
    import sys
    import time

    preload = sys.modules.get("opbench.run.judge_preload")
    return {"start_s": _STATE.get("start_s", {}), "ready_at": time.time(),
            "template": dict(preload.TIMES) if preload is not None else None}  # fmt: skip


def _plan(case: Case) -> Any:
    from opbench.judge.evaluate import plan_trials

    plan, expectations = plan_trials(case, _STATE["device"], _STATE["options"])
    kept: OrderedDict[str, Any] = _STATE["kept"]
    kept[case.test_id] = expectations
    while len(kept) > KEPT_EXPECTATIONS:
        kept.popitem(last=False)
    return plan


def _judge(
    case: Case, kind: str, raw: bytes | None, detail: str, stderr_tail: str, fields: Any
) -> tuple[Any, str]:
    from opbench.run.outcome_verdict import judge_outcome

    outcome = read_result(raw or b"", stderr_tail) if kind == "result" else None
    expectations = _STATE["kept"].pop(case.test_id, None)
    result = judge_outcome(
        case,
        outcome or Outcome(kind, None, detail, stderr_tail),
        device=_STATE["device"],
        judge_options=_STATE["options"],
        expectations=expectations,
        **fields,
    )
    return result, outcome.kind if outcome else kind
