"""A worker that exited after its last answer is replaced before the next test, and the
test goes to the new worker: never a verdict of that test (``Outcome('gone')``).

Locally the executor asks a worker whether it lives before each test; through Ray that
question cost a round trip a test, so a remote worker says it lives until ended and its
actor answers ``gone`` for a worker that died (``RemoteWorker.alive``). Both reach the
same verdicts: here a fake worker that says it lives but answers ``gone``, and a real
worker process that has exited.
"""

from __future__ import annotations

import time
from pathlib import Path

from opbench.judge.evaluate import JudgeOptions
from opbench.run.executor import ExecutionOptions, LocalExecutor
from opbench.run.pool import Outcome, WorkerConfig, WorkerProcess
from opbench.run.store import ResultStore
from opbench.run.worker_process import GONE_DETAIL
from opbench.suites.case import Case

CASES = [Case(op="relu.default", args="((T([4, 3], f32),), {})", seed=s, suite="t")
         for s in range(3)]  # fmt: skip


class _Worker:
    """Answers with a worker error (a recorded result), or ``gone`` the first
    ``gone_for`` times it is asked, while it still says it lives."""

    sandbox_level = "off"
    preload_asked = False
    preload_unit = None
    preload_result = None

    def __init__(self, name: str, gone_for: int) -> None:
        self.name, self.gone_for = name, gone_for
        self.loaded_info = None
        self.unit = None
        self.asked = 0
        self.killed = False

    def load(self, unit):
        self.unit, self.loaded_info = unit, {"type": "loaded"}
        return self.loaded_info

    def alive(self) -> bool:
        return not self.killed

    def run_case(self, case, timeout_s, plan=None, *, raw=False) -> Outcome:
        self.asked += 1
        if self.asked <= self.gone_for:
            return Outcome("gone", detail=GONE_DETAIL)
        return Outcome("result", message={"worker_error": "fake worker", "elapsed_s": 0.0})

    def kill(self) -> None:
        self.killed = True

    stop = retire = kill


class _Factory:
    """Its first ``gone`` workers have exited (answer ``gone`` once); the rest work."""

    spares_enabled = False

    def __init__(self, gone: int) -> None:
        self.gone = gone
        self.made: list[_Worker] = []

    def get(self, device: str, unit=None) -> _Worker:
        w = _Worker(f"fake-{len(self.made) + 1}", 1 if len(self.made) < self.gone else 0)
        self.made.append(w)
        return w

    def warm(self, device: str, slots: int = 1) -> None:
        """No spares."""

    def backend_settings(self):
        return None

    def close(self) -> None:
        pass


def _run(tmp_path: Path, gone: int) -> tuple[list, _Factory]:
    store = ResultStore(tmp_path / "results.sqlite")
    factory = _Factory(gone)
    executor = LocalExecutor(
        WorkerConfig(backend="aten", device="cpu"), ExecutionOptions(workers=1),
        store, tmp_path / "logs", JudgeOptions(), factory=factory,  # type: ignore[arg-type]
    )  # fmt: skip
    executor.run(CASES, lambda r: None)
    results = sorted(store.results(), key=lambda r: r.seed)
    store.close()
    return results, factory


def test_a_gone_worker_is_replaced_and_the_test_goes_to_the_new_one(tmp_path):
    results, factory = _run(tmp_path, gone=1)
    assert [(r.status, r.category) for r in results] == [("failed", "error")] * 3
    assert "fake worker" in results[0].message  # the new worker's answer, judged
    assert len(factory.made) == 2 and factory.made[0].killed
    assert [w.asked for w in factory.made] == [1, 3]


def test_two_gone_workers_in_a_row_are_the_tests_crash(tmp_path):
    results, factory = _run(tmp_path, gone=2)
    assert (results[0].status, results[0].category) == ("failed", "crash")
    assert GONE_DETAIL in results[0].message
    assert [(r.status, r.category) for r in results[1:]] == [("failed", "error")] * 2


def test_a_worker_process_that_has_exited_answers_gone_and_is_sent_nothing(tmp_path):
    w = WorkerProcess(WorkerConfig(backend="aten", device="cpu", sandbox="off"), "cpu",
                      tmp_path, "w-test")  # fmt: skip
    try:
        w.wait_ready()
        w.kill()
        deadline = time.monotonic() + 10
        while w.alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        out = w.run_case(CASES[0].to_dict(), 10.0)
        assert out.kind == "gone" and out.detail == GONE_DETAIL
    finally:
        w.kill()
