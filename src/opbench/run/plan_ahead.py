"""Planning a slot's next tests while its worker runs the current one.

A test's trial plan and expectations (the harness's own inputs and references) are the
harness's work per test; computed in turn with the worker's, each waits for the other.
:class:`PlansAhead` computes them on harness threads ahead of the worker, for
:class:`~opbench.run.executor.LocalExecutor`'s slots (local and Ray alike), or in a
planning process of the slot's own (``OPBENCH_PLAN_IN=process``, :func:`plan_where`).
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from typing import Any

from opbench.suites.case import Case

__all__ = ["PlanningProcessDied", "PlansAhead", "plan_depth", "plan_where"]


class PlanningProcessDied(RuntimeError):
    """A slot's planning process died planning one test, twice (the second time alone on
    a fresh process): that test's own ``judge_error``; the slot plans on with a new one."""


def plan_where() -> str:
    """Where a slot plans: ``OPBENCH_PLAN_IN`` ``thread`` (default) or ``process``.

    Threads share the harness's interpreter with every other slot's planning and judging.
    On 2 x H100 the OpInfo suite took longer on 2 GPUs than on 1 (147.5 s of tests against
    124.8 s, ``results/scaling-opinfo-h100x2.md``) while py-spy put the planning thread
    on each slot's critical path (``results/harness-profile-opinfo-h200.md``). A process
    a slot plans beside the others without sharing a GIL or a CUDA context. Not yet timed
    on GPUs, so not the default: ``benchmarks/probes/planning_scaling.py`` and
    ``gpu_scaling.py --env OPBENCH_PLAN_IN=process`` measure it."""
    where = os.environ.get("OPBENCH_PLAN_IN", "thread")
    if where not in ("thread", "process"):
        raise ValueError(f"OPBENCH_PLAN_IN must be 'thread' or 'process', not {where!r}")
    return where


def plan_depth() -> int:
    """How many tests a slot plans ahead of its worker: ``OPBENCH_PLAN_AHEAD`` (default 1).

    On a 4-GPU run of the traces suite each slot's one planning thread was busy as long as
    its worker (2026-11-27, ``results/scaling-traces-h100x4.md``), and planning is mostly
    torch ops that release the GIL; more threads a slot may then keep the GPUs fed.
    Measured once: 2 gave the same 4 x H100 traces run a tests phase of 56.2 s against
    59.6 s (one run each, ``results/scaling-traces-h100x4-plan-ahead.md``), within a
    rerun's spread, so the default stays 1; the run's ``env`` records the variable."""
    try:
        return max(1, int(os.environ.get("OPBENCH_PLAN_AHEAD", "1")))
    except ValueError:
        raise ValueError("OPBENCH_PLAN_AHEAD must be a whole number of tests") from None


class PlansAhead:
    """A test's trial plan and expectations (the harness's own inputs and references,
    :func:`opbench.judge.evaluate.plan_trials`), computed ahead on threads of the harness
    while the worker runs the current test: on 2 cores the two processes then work at
    the same time instead of in turn. Only without timing (``ahead`` False under
    ``--perf``), where the harness's work would share the CPU or GPU with the measured
    calls. ``depth`` tests ahead, on as many threads (:func:`plan_depth`).

    ``processes``: plan in that many processes of the harness's own (spawned, so a
    fresh CUDA state; they import opbench and torch, never a kernel), each with
    ``threads`` CPU threads for torch; ``compute`` must then pickle (a module-level
    function or a ``functools.partial`` of one). Ahead or not, every plan is made there,
    so the harness's interpreter only sends cases and reads plans. A process that dies
    planning a test is replaced and the test planned again alone; if it dies again, the
    test's plan raises :class:`PlanningProcessDied`."""

    def __init__(
        self,
        compute: Callable[[Case], Any],
        device: str,
        *,
        ahead: bool,
        depth: int | None = None,
        processes: bool = False,
        threads: int = 1,
    ) -> None:
        self._compute = compute
        self._pool: Any = None
        self.depth = depth or plan_depth()
        self._pending: dict[str, Any] = {}
        self._ahead = ahead
        self._device, self._threads = device, threads
        self._in_process = processes
        if processes:
            self._pool = self._start_processes()
        elif ahead:
            from concurrent.futures import ThreadPoolExecutor

            from opbench.instrument.tensors import bind_device

            self._pool = ThreadPoolExecutor(
                self.depth, "opbench-plan", initializer=bind_device, initargs=(device,)
            )

    def _start_processes(self) -> Any:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        pool = ProcessPoolExecutor(
            self.depth,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_start_planner,
            initargs=(self._device, self._threads),
        )
        pool.submit(_ready)  # start it now, beside the worker's start, not at the first plan
        return pool

    def _submit(self, case: Case) -> Any:
        if self._in_process:
            return self._pool.submit(_plan_saved, self._compute, case)
        return self._pool.submit(self._compute, case)

    def _result(self, case: Case, future: Any) -> Any:
        if not self._in_process:
            return future.result()
        from concurrent.futures.process import BrokenProcessPool

        try:
            return _load_saved(future.result())
        except BrokenProcessPool:
            pass
        # which of the pending plans killed it is unknown: a fresh process, this test alone
        self._restart()
        try:
            return _load_saved(self._pool.submit(_plan_saved, self._compute, case).result())
        except BrokenProcessPool:
            self._restart()
            raise PlanningProcessDied(
                f"the planning process on {self._device} died planning {case.test_id}, "
                "twice (the second time alone on a new process)"
            ) from None

    def _restart(self) -> None:
        self._pending.clear()
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._pool = self._start_processes()

    def ahead(self, cases: Case | list[Case]) -> None:
        """Start planning the next tests (up to ``depth`` of them)."""
        if self._pool is None or not self._ahead:
            return
        for case in ([cases] if isinstance(cases, Case) else cases)[: self.depth]:
            if case.test_id not in self._pending:
                self._pending[case.test_id] = self._submit(case)

    def get(self, case: Case) -> Any:
        """``case``'s plan: the one planned ahead, else computed now (and what was planned
        for other tests is dropped: the run went another way)."""
        future = self._pending.pop(case.test_id, None)
        if future is not None:
            return self._result(case, future)
        for stale in self._pending.values():
            stale.cancel()
        self._pending.clear()
        if self._in_process:
            return self._result(case, self._submit(case))
        return self._compute(case)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)


def _start_planner(device: str, threads: int) -> None:
    """A planning process's start: its torch threads, its GPU, the planning's imports."""
    import torch

    from opbench.instrument.tensors import bind_device

    torch.set_num_threads(max(1, threads))
    bind_device(device)
    import opbench.judge.evaluate  # noqa: F401 - imported before the first plan waits


def _ready() -> None:
    """Nothing: submitted first, so the process starts with the slot."""


def _plan_saved(compute: Callable[[Case], Any], case: Case) -> bytes:
    """``compute(case)`` as ``torch.save`` bytes. A pickle through the pool would move
    every tensor through shared memory, a file descriptor and a socket connection each;
    one buffer a plan is a copy of its bytes."""
    import torch

    buf = io.BytesIO()
    torch.save(compute(case), buf)
    return buf.getvalue()


def _load_saved(data: bytes) -> Any:
    """A plan from the slot's own planning process (trusted: it never imports a kernel)."""
    import torch

    return torch.load(io.BytesIO(data), weights_only=False)
