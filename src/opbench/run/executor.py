"""Local execution: a pool of worker slots pulling cases from one shared queue.

Each slot is a harness thread that owns one worker process (one per GPU, round-robin
over the visible devices; N processes on CPU). The slot sends a case, waits with a
timeout, turns the worker's answer into a verdict with the trusted judge (in this
process, which never imports candidate code), and records it in the store before
taking the next case, so a slow test only ever holds up its own slot.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from opbench.run.pool import Outcome, WorkerConfig, WorkerFactory, WorkerProcess, WorkerStartError
from opbench.run.store import ResultStore, TestResult
from opbench.suites.case import Case

log = logging.getLogger(__name__)


@dataclass
class ExecutionOptions:
    workers: int = 1
    devices: Sequence[str] = ("cpu",)
    test_timeout_s: float = 120.0
    max_crashes_per_op: int = 3


class CrashBudget:
    """Counts crashes/timeouts per op; past the budget an op's tests are not run."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._counts: Counter[str] = Counter()
        self._kinds: dict[str, Counter[str]] = {}
        self._lock = threading.Lock()

    def record(self, op: str, kind: str) -> None:
        with self._lock:
            self._counts[op] += 1
            self._kinds.setdefault(op, Counter())[kind] += 1

    def history(self, op: str) -> list[str]:
        """The kinds recorded for ``op``, one per crash (to seed another budget with)."""
        with self._lock:
            return list(self._kinds.get(op, Counter()).elements())

    def exhausted(self, op: str) -> tuple[bool, str]:
        with self._lock:
            n = self._counts[op]
            if self.limit > 0 and n >= self.limit:
                kind = self._kinds[op].most_common(1)[0][0]
                return True, kind
        return False, ""


def not_run_result(case: Case, kind: str, limit: int, *, backend: str, device: str) -> TestResult:
    """The record of a test skipped because its op's kernel used up its crash budget."""
    return TestResult(
        test_id=case.test_id,
        op=case.op,
        args=case.args,
        seed=case.seed,
        suite=case.suite,
        status="not_run",
        category=kind,
        message=(
            f"not run: the kernel for {case.op} already failed with {kind} {limit} times "
            "(--max-crashes-per-op)"
        ),
        case_json=case.to_dict(),
        backend=backend,
        device=device,
    )


def judge_outcome(
    case: Case,
    outcome: Outcome,
    *,
    device: str,
    judge_options: Any,
    backend: str,
    worker: str,
) -> TestResult:
    """Turn what a worker sent (or how it died) into a :class:`TestResult`."""
    base = dict(
        test_id=case.test_id,
        op=case.op,
        args=case.args,
        seed=case.seed,
        suite=case.suite,
        case_json=case.to_dict(),
        backend=backend,
        device=device,
        worker=worker,
    )
    if outcome.kind != "result":
        msg = outcome.detail
        if outcome.stderr_tail:
            msg += "\n--- last stderr lines ---\n" + outcome.stderr_tail
        return TestResult(status="failed", category=outcome.kind, message=msg, **base)
    m = outcome.message or {}
    elapsed = m.get("elapsed_s")
    if m.get("worker_error"):
        return TestResult(
            status="failed",
            category="error",
            message=f"worker error: {m['worker_error']}",
            details={"traceback": m.get("tb", "")},
            duration_s=elapsed,
            **base,
        )
    if m.get("no_kernel"):
        return TestResult(
            status="not_implemented",
            category="not_implemented",
            message=f"the backend has no kernel for {case.op}",
            duration_s=elapsed,
            **base,
        )
    from opbench.judge.evaluate import CandidateReport, judge_report

    try:
        report = CandidateReport.from_plain(m["report"])
    except Exception as e:  # malformed report from an untrusted worker
        return TestResult(
            status="failed", category="error", message=f"unreadable report: {e}", **base
        )
    t_judge = time.perf_counter()
    verdict = judge_report(case, report, device, judge_options)
    judge_s = time.perf_counter() - t_judge
    result = TestResult(
        status=verdict.status,
        category=verdict.category,
        message=verdict.message,
        weak=verdict.weak,
        max_abs_err=verdict.max_abs_err,
        max_rel_err=verdict.max_rel_err,
        details={**(verdict.details or {}), "judge_s": round(judge_s, 4)},
        duration_s=elapsed,
        **base,
    )
    timing = m.get("timing")
    if timing and verdict.status == "passed":
        from opbench.judge.perf_verdict import apply_timing

        apply_timing(result, case, timing, device, m.get("work"))
    return result


def with_hidden_run_dir(config: WorkerConfig, store: ResultStore, *dirs: Path) -> WorkerConfig:
    """``config`` with the results store's folder (and ``dirs``) hidden from sandboxed workers."""
    hide = list(config.hide)
    for d in (store.path.parent, *dirs):
        s = str(Path(d).resolve())
        if s not in hide:
            hide.append(s)
    return replace(config, hide=hide)


class LocalExecutor:
    """Runs cases on local worker processes and stores each result as it finishes."""

    def __init__(
        self,
        config: WorkerConfig,
        options: ExecutionOptions,
        store: ResultStore,
        log_dir: Path,
        judge_options: Any,
    ) -> None:
        self.config = with_hidden_run_dir(config, store, log_dir)
        config = self.config
        self.options = options
        self.store = store
        self.judge_options = judge_options
        self.factory = WorkerFactory(config, log_dir)
        self.budget = CrashBudget(options.max_crashes_per_op)
        self.worker_info: dict[str, Any] = {}
        self.sandbox_level: str | None = None
        self._error: BaseException | None = None

    def run(self, cases: Sequence[Case], on_result: Callable[[TestResult], None]) -> None:
        todo: queue.Queue[Case] = queue.Queue()
        for c in cases:
            todo.put(c)
        devices = list(self.options.devices) or ["cpu"]
        n = max(1, self.options.workers)
        threads = [
            threading.Thread(
                target=self._slot, args=(devices[i % len(devices)], todo, on_result), daemon=True
            )
            for i in range(n)
        ]
        for t in threads:
            t.start()
        try:
            for t in threads:
                while t.is_alive():
                    t.join(0.2)
        finally:
            self.factory.close()
        if self._error is not None:
            raise self._error

    def _slot(
        self, device: str, todo: queue.Queue, on_result: Callable[[TestResult], None]
    ) -> None:
        worker: WorkerProcess | None = None
        if device.startswith("cuda"):
            import torch

            # the judge's references then land on this slot's GPU by default, and its
            # generator is the one random ops draw from
            torch.cuda.set_device(torch.device(device))
        try:
            while True:
                try:
                    case = todo.get_nowait()
                except queue.Empty:
                    break
                exhausted, kind = self.budget.exhausted(case.op)
                if exhausted:
                    result = not_run_result(
                        case, kind, self.budget.limit, backend=self.config.backend, device=device
                    )
                    self.store.add(result)
                    on_result(result)
                    continue
                if worker is None or not worker.alive():
                    worker = self.factory.get(device)
                    self.sandbox_level = worker.sandbox_level
                    if worker.ready_info:
                        self.worker_info = worker.ready_info
                started = time.perf_counter()
                outcome = worker.run_case(case.to_dict(), self.options.test_timeout_s)
                if outcome.kind in ("crash", "timeout", "oom"):
                    self.budget.record(case.op, outcome.kind)
                    worker = None
                result = judge_outcome(
                    case,
                    outcome,
                    device=device,
                    judge_options=self.judge_options,
                    backend=self.config.backend,
                    worker=worker.name if worker else "",
                )
                if result.duration_s is None:
                    result.duration_s = time.perf_counter() - started
                self.store.add(result)
                on_result(result)
        except WorkerStartError as e:
            self._error = e
            # drain so the other slots stop too
            while not todo.empty():
                try:
                    todo.get_nowait()
                except queue.Empty:
                    break
        except BaseException as e:  # noqa: BLE001 - surface in the main thread
            self._error = e
        finally:
            if worker is not None:
                worker.stop()
