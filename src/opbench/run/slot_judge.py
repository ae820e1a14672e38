"""A slot's planning and judging in processes of its own (on GPUs by default:
:func:`plan_where`).

With threads, every slot plans (draws inputs, runs eager and the float64 reference) and
judges (reads the worker's answer, compares) in the harness's one interpreter. On 2 x H100
the OpInfo suite then took longer on 2 GPUs than on 1 (147.5 s of tests against 124.8 s,
``results/scaling-opinfo-h100x2.md``), with the planning thread on each slot's critical
path (``results/harness-profile-opinfo-h200.md``). Here a slot's tests are planned and
judged in spawned processes (a fresh CUDA state; they import opbench and torch, never a
kernel, so they are as trusted as the harness): the process that planned a test keeps its
expectations, which can be hundreds of megabytes, and receives the worker's answer as the
bytes the worker wrote.
What crosses to the harness is a plan (seeds) and a verdict.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from typing import Any

from opbench.run.worker_process import Outcome, read_result
from opbench.suites.case import Case

__all__ = ["JudgingProcessDied", "SlotJudge", "plan_where"]

#: Expectations a judging process keeps for tests planned but not yet judged: the test
#: in hand and those planned ahead. One evicted (the run went another way) is computed
#: again when its answer comes, as a thread-planned test's missing expectations are.
KEPT_EXPECTATIONS = 8


class JudgingProcessDied(RuntimeError):
    """A slot's judging process died on one test twice (the second time alone, on a new
    process): that test's own ``judge_error``; the slot goes on with a new process."""


def plan_where(device: str) -> str:
    """Where a slot on ``device`` plans and judges: ``OPBENCH_PLAN_IN`` ``thread`` (the
    harness's own threads), ``process`` (:class:`SlotJudge`) or ``auto`` (the default:
    a process on a GPU, threads on the CPU).

    On 4 x H100 (2026-11-28, quick OpInfo profile, f32, 2,907 tests,
    ``results/scaling-opinfo-h100x4-2026-11-28.md``) threads took 106.7 s on 4 GPUs and processes
    48.9 s; on 1 GPU processes took 102.2 s where threads had not finished in 120 s. On the
    2-core CPU a judging process only competes with the workers for the same two cores
    (traces 101.9 s against 94.0 s on threads), so the CPU keeps threads."""
    where = os.environ.get("OPBENCH_PLAN_IN", "auto")
    if where not in ("thread", "process", "auto"):
        raise ValueError(f"OPBENCH_PLAN_IN must be 'thread', 'process' or 'auto', not {where!r}")
    if where == "auto":
        return "process" if device.startswith("cuda") else "thread"
    return where


#: Modules a suite's judging processes import as they start (:class:`SlotJudge`'s
#: ``warm``): the OpInfo suite's first plan imported about 1,200 modules (the OpInfo
#: database through ``opinfo_samples``), 2.5-2.8 s on the 2-core CPU.
WARM_BY_SUITE: dict[str, tuple[str, ...]] = {"opinfo": ("opbench.suites.opinfo_samples",)}


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
        """``warm``: modules each process imports as it starts, before any test (the
        OpInfo database for the OpInfo suite: 2.5-2.8 s of the first plan on the 2-core
        CPU, ~1,200 modules)."""
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
        self._pools = [self._start() for _ in range(self.depth)]

    def _start(self) -> Any:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        pool = ProcessPoolExecutor(
            1,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_start_judge,
            initargs=(self.device, self._threads, self._options, self._warm),
        )
        pool.submit(_ready)  # start it now, beside the worker's start, not at the first plan
        return pool

    def _next(self) -> int:
        """The process whose turn it is to plan a test."""
        i = self._turn % self.depth
        self._turn += 1
        return i

    def _call(self, what: str, case: Case, i: int, future: Any, fn: Any, *args: Any) -> Any:
        """``future``'s answer from process ``i``; if it died, a new one and ``fn(*args)``
        alone."""
        from concurrent.futures.process import BrokenProcessPool

        try:
            return future.result()
        except BrokenProcessPool:
            pass
        self._restart(i)  # which request killed it is unknown: this one again, alone
        try:
            return self._pools[i].submit(fn, *args).result()
        except BrokenProcessPool:
            self._restart(i)
            raise JudgingProcessDied(
                f"the judging process on {self.device} died {what} {case.test_id}, twice "
                "(the second time alone on a new process)"
            ) from None

    def _restart(self, i: int) -> None:
        for test_id in [t for t, (j, _) in self._pending.items() if j == i]:
            del self._pending[test_id]
        self._pools[i].shutdown(wait=False, cancel_futures=True)
        self._pools[i] = self._start()

    def ahead(self, cases: Case | list[Case]) -> None:
        """Start planning the next tests (only without timing: planning beside measured
        calls would share the CPU or GPU with them)."""
        if not self._ahead:
            return
        for case in ([cases] if isinstance(cases, Case) else cases)[: self.depth]:
            if case.test_id not in self._pending:
                i = self._next()
                self._pending[case.test_id] = (i, self._pools[i].submit(_plan, case))

    def get(self, case: Case) -> tuple[Any, None]:
        """``case``'s trial plan (its expectations stay in the process that made it)."""
        found = self._pending.pop(case.test_id, None)
        if found is None:
            for _, stale in self._pending.values():
                stale.cancel()
            self._pending.clear()
            i = self._next()
            found = (i, self._pools[i].submit(_plan, case))
        i, future = found
        plan = self._call("planning", case, i, future, _plan, case)
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
        return self._call("judging", case, i, self._pools[i].submit(_judge, *args), _judge,
                          *args)  # fmt: skip

    def close(self) -> None:
        for pool in self._pools:
            pool.shutdown(wait=True, cancel_futures=True)


# -- in the judging process ------------------------------------------------------------
_STATE: dict[str, Any] = {}


def _start_judge(device: str, threads: int, options: Any, warm: tuple[str, ...] = ()) -> None:
    """The process's start: its torch threads, its GPU, the imports of planning and
    judging and the ``warm`` modules, so the first test waits for none of them."""
    import importlib

    import torch

    from opbench.instrument.tensors import bind_device

    torch.set_num_threads(max(1, threads))
    bind_device(device)
    import opbench.judge.evaluate  # noqa: F401
    import opbench.run.outcome_verdict  # noqa: F401

    for name in warm:
        importlib.import_module(name)

    _STATE.update(device=device, options=options, kept=OrderedDict())


def _ready() -> None:
    """Nothing: submitted first, so the process starts with the slot."""


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
