"""Planning in a process of the slot's own (``OPBENCH_PLAN_IN=process``): the same plans
and verdicts as planning on harness threads, made in another process, and a planning
process that dies costs one test's plan, never the slot."""

from __future__ import annotations

import functools
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from opbench.judge.evaluate import plan_trials
from opbench.run.plan_ahead import PlanningProcessDied, PlansAhead, plan_where
from opbench.spec.judge_options import JudgeOptions
from opbench.suites.case import Case

RELU = Case(op="relu.default", args="((T([4, 3], f32),), {})", suite="t", seed=1)
ADD = Case(op="add.Tensor", args="((T([5], f32), T([5], f32)), {})", suite="t", seed=2)
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def helpers(tmp_path, monkeypatch):
    """Planning functions a spawned process can import (it gets the parent's sys.path)."""
    (tmp_path / "planning_helpers.py").write_text(
        textwrap.dedent(f"""
        import os
        from pathlib import Path

        def pid(case):
            return os.getpid()

        def die(case):
            os._exit(7)

        def die_on_relu_once(case):
            marker = Path({str(tmp_path)!r}) / "died"
            if case.op == "relu.default" and not marker.exists():
                marker.write_text("")
                os._exit(7)
            return case.test_id
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import planning_helpers

    return planning_helpers


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b) and a.dtype == b.dtype
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    return a == b


def test_plans_made_in_a_process_equal_those_made_here_and_come_from_another_process(helpers):
    compute = functools.partial(plan_trials, device="cpu", options=JudgeOptions())
    plans = PlansAhead(compute, "cpu", ahead=True, processes=True)
    try:
        plans.ahead(ADD)
        got = {c.test_id: plans.get(c) for c in (RELU, ADD)}
    finally:
        plans.close()
    for case in (RELU, ADD):
        plan, expectations = got[case.test_id]
        here_plan, here = compute(case)
        drawn = {k: v for k, v in plan.to_dict().items() if k != "repeat_after"}  # random
        assert drawn == {k: v for k, v in here_plan.to_dict().items() if k != "repeat_after"}
        assert expectations.keys() == here.keys()
        for seed, exp in expectations.items():
            assert _same(exp.eager, here[seed].eager) and _same(exp.ref, here[seed].ref)
            assert exp.input_digests == here[seed].input_digests
    pids = PlansAhead(helpers.pid, "cpu", ahead=False, processes=True)
    try:
        assert pids.get(RELU) != os.getpid()
    finally:
        pids.close()


def test_a_process_that_dies_once_is_replaced_and_the_test_planned_again(helpers):
    plans = PlansAhead(helpers.die_on_relu_once, "cpu", ahead=True, processes=True)
    try:
        plans.ahead(RELU)  # dies in the background; the test is planned again, alone
        assert plans.get(RELU) == RELU.test_id
        assert plans.get(ADD) == ADD.test_id
    finally:
        plans.close()


def test_a_test_whose_planning_always_kills_the_process_is_its_own_error(helpers):
    plans = PlansAhead(helpers.die, "cpu", ahead=True, processes=True)
    try:
        with pytest.raises(PlanningProcessDied, match=RELU.test_id):
            plans.get(RELU)
    finally:
        plans.close()


def test_a_bad_plan_place_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("OPBENCH_PLAN_IN", "gpu")
    with pytest.raises(ValueError, match="OPBENCH_PLAN_IN"):
        plan_where()


def _verdicts(out: Path, where: str) -> dict[str, str]:
    cmd = [sys.executable, "-m", "opbench.cli", "run", "--suite", "opinfo", "--dtypes", "f32",
           "--ops", "add,sort,cumsum,where", "--no-perf", "--workers", "2", "--out", str(out)]  # fmt: skip
    env = {**os.environ, "OPBENCH_PLAN_IN": where, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    with sqlite3.connect(out / "results.sqlite") as con:
        rows = con.execute("select test_id, status, category from results").fetchall()
    return {t: f"{s}/{c}" for t, s, c in rows}


@pytest.mark.slow
def test_a_run_planned_in_processes_gives_every_verdict_a_run_planned_on_threads_gives(
    tmp_path,
):
    threads = _verdicts(tmp_path / "threads", "thread")
    processes = _verdicts(tmp_path / "processes", "process")
    assert len(threads) > 20
    assert processes == threads
