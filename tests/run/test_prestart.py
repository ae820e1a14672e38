"""Workers and judging processes started ahead of a run (``LocalExecutor.prestart``,
called while the suite is built): the slots take the processes started ahead instead of
starting their own, and the ones no run used end with :meth:`release` (issue #35: every
slot's first plan came 7.3-9.6 s after a run's start on 4 x H200)."""

from __future__ import annotations

import pytest
from test_slot_errors import _cases, _Factory, _PerOpPlanner

from opbench.judge.evaluate import JudgeOptions
from opbench.run import executor as executor_mod
from opbench.run.executor import ExecutionOptions, LocalExecutor
from opbench.run.pool import WorkerConfig
from opbench.run.slot_judge import SlotJudge
from opbench.run.store import ResultStore


class _Counted(SlotJudge):
    """A real judging process that notes its starts and closes."""

    started: list[_Counted] = []
    closed: list[_Counted] = []

    def __init__(self, *a, **k) -> None:
        super().__init__(*a, **k)
        _Counted.started.append(self)

    def close(self) -> None:
        _Counted.closed.append(self)
        super().close()


class _ClosedFactory(_Factory):
    closed = 0

    def close(self) -> None:
        _ClosedFactory.closed += 1


def _executor(tmp_path, workers: int) -> LocalExecutor:
    return LocalExecutor(
        WorkerConfig(backend="aten", device="cpu"),
        ExecutionOptions(workers=workers, devices=["cpu"]),
        ResultStore(tmp_path / "results.sqlite"),
        tmp_path / "logs",
        JudgeOptions(),
        planner=_PerOpPlanner("aten"),
    )


@pytest.fixture
def counted(monkeypatch):
    monkeypatch.setenv("OPBENCH_PLAN_IN", "process")
    monkeypatch.setattr(executor_mod, "SlotJudge", _Counted)
    _Counted.started, _Counted.closed = [], []
    _ClosedFactory.closed = 0


@pytest.mark.slow  # processes of their own
def test_the_slots_take_the_judging_processes_started_ahead(tmp_path, counted):
    ex = _executor(tmp_path, workers=2)
    ex.factory = _ClosedFactory(set())  # type: ignore[assignment]
    ex.prestart()
    ex._judges_started()  # they start on a thread of their own, beside the build
    assert len(_Counted.started) == 2  # before the run: one a slot
    ex.run(_cases(), lambda r: None)
    assert len(_Counted.started) == 2  # the run started none of its own
    assert len(list(ex.store.results())) == len(_cases())  # every test judged
    assert sorted(map(id, _Counted.closed)) == sorted(map(id, _Counted.started))
    assert _ClosedFactory.closed == 1  # by the run, once: release had nothing left


@pytest.mark.slow  # processes of their own
def test_what_a_run_never_used_ends_with_release(tmp_path, counted):
    ex = _executor(tmp_path, workers=2)
    ex.factory = _ClosedFactory(set())  # type: ignore[assignment]
    ex.prestart()
    ex._judges_started()
    ex.release()  # the suite had nothing to run (a finished run resumed, a build error)
    assert len(_Counted.closed) == 2 and _ClosedFactory.closed == 1
    ex.release()  # twice is harmless
    assert len(_Counted.closed) == 2 and _ClosedFactory.closed == 1


class _WarmNoted(_ClosedFactory):
    warmed: list[str] = []

    def warm(self, device: str, slots: int = 1) -> None:
        _WarmNoted.warmed.append(device)


def test_slots_that_judge_on_threads_start_nothing_ahead(tmp_path, counted, monkeypatch):
    """The CPU's default: workers and judging start at the run, as before (on 2 cores
    they only slowed the suite's build)."""
    monkeypatch.setenv("OPBENCH_PLAN_IN", "thread")
    ex = _executor(tmp_path, workers=2)
    ex.factory = _WarmNoted(set())  # type: ignore[assignment]
    _WarmNoted.warmed = []
    ex.prestart()
    assert _Counted.started == [] and _WarmNoted.warmed == []
    ex.release()
    assert _ClosedFactory.closed == 0  # nothing was started, nothing to close
