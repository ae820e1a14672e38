"""A harness error in one slot never ends a run the other slots can finish (issue #35):
the chunk it hit stays unrecorded (``--resume`` runs it), the summary says so, and the
other units are judged as usual. A run in which nothing could be done still fails with
the error, as before.

The worker factory is a fake whose ``get`` raises for chosen units (the way a race in
the real one did, "cannot join thread before it is started"); its workers answer every
test with a worker error, which the real judge turns into a recorded ``error`` result.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from opbench.judge.evaluate import JudgeOptions
from opbench.run.executor import ExecutionOptions, LocalExecutor
from opbench.run.isolation import IsolationPlanner
from opbench.run.pool import Outcome, WorkerConfig
from opbench.run.session import unfinished_summary
from opbench.run.store import ResultStore
from opbench.suites.case import Case

OPS = ["relu.default", "neg.default", "abs.default", "exp.default"]
PER_OP = 4


class _Worker:
    """Loads any unit and answers every test with a worker error (a recorded result)."""

    sandbox_level = "off"
    preload_asked = False
    preload_unit = None
    preload_result = None

    def __init__(self, name: str) -> None:
        self.name = name
        self.loaded_info = None
        self.unit = None

    def load(self, unit):
        self.unit = unit
        self.loaded_info = {"type": "loaded"}
        return self.loaded_info

    def alive(self) -> bool:
        return True

    def run_case(self, case, timeout_s, plan=None, *, raw=False) -> Outcome:
        return Outcome("result", message={"worker_error": "fake worker", "elapsed_s": 0.0})

    def kill(self) -> None:
        pass

    stop = retire = kill


class _Factory:
    """Hands out fake workers; ``get`` raises for the units in ``broken``."""

    spares_enabled = False

    def __init__(self, broken: set[tuple[str, ...]]) -> None:
        self.broken = broken
        self.n = 0

    def get(self, device: str, unit=None) -> _Worker:
        if unit in self.broken:
            raise RuntimeError("cannot join thread before it is started")
        self.n += 1
        return _Worker(f"fake-{self.n}")

    def warm(self, device: str, slots: int = 1) -> None:
        """No spares to start ahead (``spares_enabled`` is False)."""

    def backend_settings(self):
        return None

    def close(self) -> None:
        pass


class _PerOpPlanner(IsolationPlanner):
    """aten, but one unit per operator (as a kernel directory has)."""

    def unit_of(self, op: str):
        return (op.replace(".", "__"),)


def _cases() -> list[Case]:
    return [
        Case(op=op, args="((T([4, 3], f32),), {})", seed=s, suite="t")
        for op in OPS
        for s in range(PER_OP)
    ]


def _run(tmp_path: Path, broken: set[str], workers: int) -> tuple[LocalExecutor, ResultStore]:
    store = ResultStore(tmp_path / "results.sqlite")
    executor = LocalExecutor(
        WorkerConfig(backend="aten", device="cpu"),
        ExecutionOptions(workers=workers, devices=["cpu"]),
        store,
        tmp_path / "logs",
        JudgeOptions(),
        planner=_PerOpPlanner("aten"),
        factory=_Factory({(op.replace(".", "__"),) for op in broken}),  # type: ignore[arg-type]
    )
    executor.run(_cases(), lambda r: None)
    return executor, store


@pytest.mark.parametrize("workers", [1, 2])
def test_an_error_in_one_unit_leaves_it_unrecorded_and_the_run_goes_on(tmp_path, workers):
    executor, store = _run(tmp_path, {"neg.default"}, workers)
    results = list(store.results())
    by_op = {op: [r for r in results if r.op == op] for op in OPS}
    assert [len(by_op[op]) for op in OPS] == [PER_OP, 0, PER_OP, PER_OP]
    # neg's tests are unrecorded (--resume runs them); the others hold the fake
    # worker's answers, judged
    assert {(r.status, r.category) for r in results} == {("failed", "error")}
    assert executor.worker_info["unfinished"] == [
        {
            "ops": ["neg.default"],
            "tests": PER_OP,
            "error": "RuntimeError: cannot join thread before it is started",
        }
    ]
    left = unfinished_summary(_cases(), results, executor.worker_info["unfinished"])
    assert left is not None and left["tests"] == PER_OP and left["ops"] == ["aten.neg.default"]
    assert "--resume" in left["how_to_finish"]
    store.close()


def test_a_slot_stops_after_errors_in_a_row_and_what_it_left_is_noted(tmp_path):
    """One slot, the second and third units broken: it stops there; the fourth unit
    was never started, and is noted as such instead of vanishing."""
    executor, store = _run(tmp_path, {"neg.default", "abs.default"}, workers=1)
    assert {r.op for r in store.results()} == {"relu.default"}
    notes = executor.worker_info["unfinished"]
    assert [n["ops"] for n in notes] == [["neg.default"], ["abs.default"], ["exp.default"]]
    assert "not started" in notes[2]["error"]
    store.close()


def test_a_run_that_could_do_nothing_fails_with_the_error(tmp_path):
    with pytest.raises(RuntimeError, match="cannot join thread"):
        _run(tmp_path, set(OPS), workers=2)


def test_nothing_unfinished_when_every_test_has_a_result(tmp_path):
    executor, store = _run(tmp_path, set(), workers=2)
    assert "unfinished" not in executor.worker_info
    assert unfinished_summary(_cases(), list(store.results()), []) is None
    store.close()


def test_the_end_of_run_table_says_what_is_unfinished_and_how_to_finish():
    from rich.console import Console

    from opbench.report.tables import print_summary

    summary = {
        "suite": "opinfo", "backend": "aten", "device": "cpu", "run_dir": "runs/x",
        "ops": {}, "tests": {"passed": 8, "total": 8}, "timer": "cpu-wall",
        "correctness_score": 0.5, "ops_correct": 1, "ops_in_denominator": 2,
        "unfinished": unfinished_summary(
            _cases(), [], [{"ops": ["neg.default"], "tests": 4, "error": "RuntimeError: boom"}]
        ),
    }  # fmt: skip
    console = Console(width=300, record=True, color_system=None)
    print_summary(summary, console)
    text = console.export_text()
    assert f"unfinished {len(OPS) * PER_OP} test(s) of {len(OPS)} op(s)" in text
    assert "RuntimeError: boom" in text and "--resume" in text
