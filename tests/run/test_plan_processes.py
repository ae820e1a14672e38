"""Planning and judging in a process of the slot's own (``OPBENCH_PLAN_IN=process``,
:class:`~opbench.run.slot_judge.SlotJudge`): the same plans and verdicts as on harness
threads, made in another process; a worker's answer read there (a crafted or poisoned one
is the worker's crash); a process that dies costs one test, never the slot."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from opbench.judge.evaluate import plan_trials
from opbench.run import protocol, slot_judge
from opbench.run.judge_template import plan_where
from opbench.run.outcome_verdict import judge_outcome
from opbench.run.slot_judge import JudgingProcessDied, SlotJudge
from opbench.run.worker_process import Outcome
from opbench.spec.judge_options import JudgeOptions
from opbench.suites.case import Case

RELU = Case(op="relu.default", args="((T([4, 3], f32),), {})", suite="t", seed=1)
ADD = Case(op="add.Tensor", args="((T([5], f32), T([5], f32)), {})", suite="t", seed=2)
REPO = Path(__file__).resolve().parents[2]
FIELDS = {"backend": "aten", "worker": "w", "unit_info": None, "scan": []}


def _no_repeat(plan) -> dict:
    return {k: v for k, v in plan.to_dict().items() if k != "repeat_after"}  # random


def _answer(case: Case, plan, corrupt: bool = False) -> bytes:
    """What a worker answers for ``plan``: eager PyTorch run as the kernel (doubled when
    ``corrupt``), through the worker's own report (``instrument.candidate``)."""
    from opbench.instrument.candidate import run_candidate
    from opbench.spec.ops import get_overload

    op = get_overload(case.op)

    def kernel(*args, **kwargs):
        out = op(*args, **kwargs)
        return out * 2 if corrupt else out

    report = run_candidate(case, kernel, "cpu", JudgeOptions(), plan, guard=False)
    return protocol.encode_plain({"type": "result", "test_id": case.test_id, "report": report})


@pytest.mark.slow  # over 1.5 s on 2 cores (2026-11-28, --durations)
def test_plans_and_verdicts_made_in_the_process_equal_those_made_here():
    options = JudgeOptions()
    judge = SlotJudge("cpu", options, ahead=True)
    try:
        judge.ahead(ADD)  # planned while "the worker runs": served in order
        for case in (RELU, ADD):
            plan, kept = judge.get(case)
            here_plan, here = plan_trials(case, "cpu", options)
            assert kept is None and _no_repeat(plan) == _no_repeat(here_plan)
            for corrupt in (False, True):
                if corrupt:  # planned again: a judged test's expectations are gone
                    judge.get(case)
                raw = _answer(case, plan, corrupt)
                result, kind = judge.judge(case, Outcome("result", raw=raw), **FIELDS)
                local = judge_outcome(
                    case, Outcome("result", protocol.decode_plain(raw)), device="cpu",
                    judge_options=options, expectations=here, **FIELDS,
                )  # fmt: skip
                assert kind == "result"
                assert (result.status, result.category) == (local.status, local.category)
                assert result.status == ("failed" if corrupt else "passed"), result.message
    finally:
        judge.close()


@pytest.mark.parametrize(
    "raw, says",
    [(b"crafted", "unreadable message"),
     (protocol.encode_plain({"poisoned": "cudaErrorIllegalAddress"}), "IllegalAddress")],
)  # fmt: skip
@pytest.mark.slow  # over 1.5 s on 2 cores (2026-11-28, --durations)
def test_an_unreadable_or_poisoned_answer_is_the_workers_crash(raw, says):
    judge = SlotJudge("cpu", JudgeOptions(), ahead=False)
    try:
        judge.get(RELU)
        result, kind = judge.judge(RELU, Outcome("result", raw=raw), **FIELDS)
    finally:
        judge.close()
    assert kind == "crash" and result.category == "crash" and says in result.message


@pytest.mark.slow  # over 1.5 s on 2 cores (2026-11-28, --durations)
def test_a_worker_that_died_is_judged_as_it_died():
    judge = SlotJudge("cpu", JudgeOptions(), ahead=False)
    try:
        judge.get(RELU)
        result, kind = judge.judge(RELU, Outcome("timeout", detail="no answer"), **FIELDS)
    finally:
        judge.close()
    assert kind == "timeout" and result.category == "timeout"


def _die(case):
    os._exit(7)


@pytest.mark.slow  # over 1.5 s on 2 cores (2026-11-28, --durations)
def test_a_process_that_dies_is_replaced_and_a_test_that_kills_it_twice_is_its_error(
    monkeypatch,
):
    """The child unpickles ``_plan`` by name from this module: pointing it at a function
    that kills the process (the spawned child imports this test module to find it)."""
    judge = SlotJudge("cpu", JudgeOptions(), ahead=True)
    try:
        plan, _ = judge.get(RELU)  # a working process first
        monkeypatch.setattr(slot_judge, "_plan", _die)
        with pytest.raises(JudgingProcessDied, match=ADD.test_id):
            judge.get(ADD)
        monkeypatch.undo()
        assert judge.get(ADD)[0].seeds  # a new process plans on
    finally:
        judge.close()


def test_a_bad_plan_place_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("OPBENCH_PLAN_IN", "gpu")
    with pytest.raises(ValueError, match="OPBENCH_PLAN_IN"):
        plan_where("cpu")


@pytest.mark.parametrize(
    ("setting", "device", "where"),
    [(None, "cuda:1", "process"), (None, "cpu", "thread"), ("auto", "cuda", "process"),
     ("thread", "cuda:0", "thread"), ("process", "cpu", "process")],
)  # fmt: skip
def test_slots_judge_in_processes_on_gpus_and_on_threads_on_the_cpu_unless_told(
    monkeypatch, setting, device, where
):
    if setting is None:
        monkeypatch.delenv("OPBENCH_PLAN_IN", raising=False)
    else:
        monkeypatch.setenv("OPBENCH_PLAN_IN", setting)
    assert plan_where(device) == where


def _verdicts(out: Path, where: str) -> dict[str, str]:
    cmd = [sys.executable, "-m", "opbench.cli", "run", "--suite", "opinfo", "--dtypes", "f32",
           "--ops", "add,sort,cumsum,where,abs_", "--no-perf", "--workers", "2", "--out", str(out)]  # fmt: skip
    env = {**os.environ, "OPBENCH_PLAN_IN": where, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    with sqlite3.connect(out / "results.sqlite") as con:
        rows = con.execute("select test_id, status, category from results").fetchall()
    return {t: f"{s}/{c}" for t, s, c in rows}


@pytest.mark.slow
def test_a_run_judged_in_processes_gives_every_verdict_a_run_judged_on_threads_gives(
    tmp_path,
):
    threads = _verdicts(tmp_path / "threads", "thread")
    processes = _verdicts(tmp_path / "processes", "process")
    assert len(threads) > 20
    assert processes == threads


def _kept_here() -> list[str]:
    """Run in a judging process: the tests whose expectations it keeps."""
    from opbench.run import slot_judge

    return list(slot_judge._STATE["kept"])


@pytest.mark.slow  # over 1.5 s on 2 cores (2026-11-28, --durations)
def test_with_two_processes_a_slot_plans_in_turn_and_judges_where_it_planned(monkeypatch):
    """``OPBENCH_PLAN_AHEAD=2``: two processes take the slot's tests in turn (two tests
    planned while the worker runs one), and each test is judged by the process that keeps
    its expectations, with the verdicts of one process."""
    monkeypatch.setenv("OPBENCH_PLAN_AHEAD", "2")
    options = JudgeOptions()
    judge = SlotJudge("cpu", options, ahead=True)
    cases = [RELU, ADD, Case(op="relu.default", args=RELU.args, seed=9, suite="t")]
    try:
        assert judge.depth == 2 and len(judge._processes) == 2
        judge.ahead(cases[:2])
        plans = [judge.get(c)[0] for c in cases]
        kept = [judge._processes[i].pool.submit(_kept_here).result() for i in range(2)]
        assert cases[0].test_id in kept[0] and cases[1].test_id in kept[1]
        assert cases[2].test_id in kept[0]  # its turn came round again
        for case, plan in zip(cases, plans):
            result, kind = judge.judge(case, Outcome("result", raw=_answer(case, plan)), **FIELDS)
            assert kind == "result" and result.status == "passed", result.message
        kept = [judge._processes[i].pool.submit(_kept_here).result() for i in range(2)]
        assert kept == [[], []]  # each judged where its expectations were: none left over
    finally:
        judge.close()
