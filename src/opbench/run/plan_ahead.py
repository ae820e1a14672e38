"""Planning a slot's next tests while its worker runs the current one.

A test's trial plan and expectations (the harness's own inputs and references) are the
harness's work per test; computed in turn with the worker's, each waits for the other.
:class:`PlansAhead` computes them on harness threads ahead of the worker, for
:class:`~opbench.run.executor.LocalExecutor`'s slots (local and Ray alike).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from opbench.suites.case import Case

__all__ = ["PlansAhead", "plan_depth"]


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
    calls. ``depth`` tests ahead, on as many threads (:func:`plan_depth`)."""

    def __init__(
        self,
        compute: Callable[[Case], Any],
        device: str,
        *,
        ahead: bool,
        depth: int | None = None,
    ) -> None:
        self._compute = compute
        self._pool: Any = None
        self.depth = depth or plan_depth()
        self._pending: dict[str, Any] = {}
        if ahead:
            from concurrent.futures import ThreadPoolExecutor

            from opbench.instrument.tensors import bind_device

            self._pool = ThreadPoolExecutor(
                self.depth, "opbench-plan", initializer=bind_device, initargs=(device,)
            )

    def ahead(self, cases: Case | list[Case]) -> None:
        """Start planning the next tests (up to ``depth`` of them)."""
        if self._pool is None:
            return
        for case in ([cases] if isinstance(cases, Case) else cases)[: self.depth]:
            if case.test_id not in self._pending:
                self._pending[case.test_id] = self._pool.submit(self._compute, case)

    def get(self, case: Case) -> Any:
        """``case``'s plan: the one planned ahead, else computed now (and what was planned
        for other tests is dropped: the run went another way)."""
        future = self._pending.pop(case.test_id, None)
        if future is not None:
            return future.result()
        for stale in self._pending.values():
            stale.cancel()
        self._pending.clear()
        return self._compute(case)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
