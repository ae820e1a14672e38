"""The judging template (:mod:`opbench.run.judge_template`): a slot's judging processes are
forks of one process that loaded torch, the judge and the suite's warm entries once; on a
GPU the template sees no GPU and its forks get theirs back; forks that cannot start
leave the run to spawned processes, which judge as before.

Each test runs in a fresh interpreter: the template (multiprocessing's forkserver) is one
per process, started once with the first caller's settings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def _run(script: str, env: dict[str, str] | None = None) -> dict:
    """``script``'s last stdout line, as JSON, run in a fresh interpreter."""
    code = "import json, os, sys\nif __name__ == '__main__':\n" + textwrap.indent(
        textwrap.dedent(script), "    "
    )
    full_env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(HERE)]),
                **(env or {})}  # fmt: skip
    full_env.pop("OPBENCH_JUDGE_TEMPLATE", None)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=full_env, timeout=120, cwd=HERE)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def where_am_i() -> dict:
    """Run in a judging process: its parent, and what it has loaded."""
    import sys

    from opbench.suites import opinfo_samples

    return {
        "pid": os.getpid(),
        "parent": os.getppid(),
        "opinfos_loaded": opinfo_samples.opinfos_by_key.cache_info().currsize,
        "visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "torch": "torch" in sys.modules,
    }


def fork_start() -> tuple[str | None, dict]:
    """Run in a fork of the template: its ``CUDA_VISIBLE_DEVICES`` before
    :func:`~opbench.run.judge_template.child_start`, and :func:`where_am_i` after."""
    from opbench.run import judge_template

    before = os.environ.get("CUDA_VISIBLE_DEVICES")
    judge_template.child_start()
    return before, where_am_i()


def poison_forks() -> None:
    """A warm entry that makes PyTorch call every fork of the template a bad fork, as a
    template that asked CUDA something would (on a CPU machine nothing else can)."""
    import torch

    torch.cuda._is_in_bad_fork = lambda: True


@pytest.mark.slow  # a fresh interpreter and a template: ~6 s on 2 cores
def test_judging_processes_are_forks_of_one_template_with_the_suite_loaded():
    from opbench.run.warm_up import WARM_BY_SUITE

    got = _run("""
        from opbench.judge.evaluate import JudgeOptions
        from opbench.run import judge_template
        from opbench.run.slot_judge import SlotJudge
        from opbench.run.warm_up import WARM_BY_SUITE
        from test_judge_template import where_am_i

        judge_template.start("cpu", WARM_BY_SUITE["opinfo"])
        judges = [SlotJudge("cpu", JudgeOptions(), ahead=False) for _ in range(2)]
        seen = [j._processes[0].pool.submit(where_am_i).result() for j in judges]
        forked = [j._processes[0].forked for j in judges]
        report = judges[0].start_report(judge_template.started_at())
        for j in judges:
            j.close()
        print(json.dumps({"main": os.getpid(), "seen": seen, "forked": forked,
                          "report": report}))
    """)
    first, second = got["seen"]
    assert got["forked"] == [True, True]
    assert first["pid"] != second["pid"]
    assert first["parent"] == second["parent"] != got["main"]  # one template, not main
    assert first["opinfos_loaded"] == 1 and second["opinfos_loaded"] == 1  # before a plan
    # how it started, from the template's launch (t = 0 here): the warm-up's steps, then
    # the fork's first answer
    report = got["report"]
    assert report["forked"] and report["template_launched_s"] == 0
    assert set(report["template_steps_s"]) >= {"torch", *WARM_BY_SUITE["opinfo"]}
    assert 0 < report["template_done_s"] <= report["ready_s"]


def run_parallel(threads: int = 0) -> float:
    """An OpenMP parallel region (2^22 float64 values: past ATen's grain size), on
    ``threads`` threads (0: as many as the process has)."""
    import torch

    if threads:
        torch.set_num_threads(threads)
    return float((torch.ones(1 << 22, dtype=torch.float64) * 2).sum())


@pytest.mark.slow  # a fresh interpreter and a template: ~5 s on 2 cores
def test_a_fork_runs_parallel_regions_after_the_template_ran_one():
    """An OpenMP team started in the template is dead in its forks: their first parallel
    region waited for its threads forever, until the template ran on one thread."""
    got = _run("""
        from concurrent.futures import ProcessPoolExecutor
        from opbench.run import judge_template
        from test_judge_template import run_parallel

        judge_template.start("cpu", ("test_judge_template:run_parallel",))
        with ProcessPoolExecutor(1, mp_context=judge_template.context("cpu")) as pool:
            print(json.dumps({"sum": pool.submit(run_parallel, 2).result(timeout=60)}))
    """)  # fmt: skip
    assert got["sum"] == 2.0 * (1 << 22)


@pytest.mark.slow  # a fresh interpreter and a template: ~6 s on 2 cores
def test_a_gpu_runs_template_sees_no_gpu_and_its_forks_get_them_back():
    """``child_start`` in a fork: the harness's ``CUDA_VISIBLE_DEVICES`` back (on this
    CPU-only PyTorch nothing asks CUDA, so only the variables can be read)."""
    got = _run("""
        from concurrent.futures import ProcessPoolExecutor
        from opbench.run import judge_template
        from test_judge_template import fork_start

        ctx = judge_template.context("cuda:0")
        with ProcessPoolExecutor(1, mp_context=ctx) as pool:
            before, after = pool.submit(fork_start).result()
        print(json.dumps({"before": before, "after": after}))
    """, env={"CUDA_VISIBLE_DEVICES": "3,5"})  # fmt: skip
    assert got["before"] == ""  # the template hid them: its imports could not ask CUDA
    assert got["after"]["visible"] == "3,5" and got["after"]["torch"]


@pytest.mark.slow  # a fresh interpreter, a template and a spawned process: ~10 s on 2 cores
def test_forks_that_cannot_use_cuda_leave_the_run_to_spawned_judging_processes():
    got = _run("""
        from opbench.judge.evaluate import JudgeOptions
        from opbench.run import judge_template
        from opbench.run.slot_judge import SlotJudge
        from opbench.suites.case import Case

        judge_template.start("cpu", ("test_judge_template:poison_forks",))
        judge = SlotJudge("cpu", JudgeOptions(), ahead=False)
        case = Case(op="relu.default", args="((T([4, 3], f32),), {})", suite="t", seed=1)
        plan, _ = judge.get(case)  # the fork fails to start; a spawned process plans
        process = judge._processes[0]
        parent = process.pool.submit(os.getppid).result()
        judge.close()
        refused = judge_template.context("cpu").get_start_method()
        print(json.dumps({"seeds": bool(plan.seeds), "forked": process.forked,
                          "parent": parent, "main": os.getpid(), "now": refused}))
    """)  # fmt: skip
    assert got["seeds"]  # the test was planned all the same
    assert got["forked"] is False and got["parent"] == got["main"]  # spawned by the harness
    assert got["now"] == "spawn"  # and every later process too


def test_the_template_is_started_only_where_a_run_judges_in_processes(monkeypatch):
    """``opbench run`` on the CPU (threads by default) starts no template."""
    from opbench.run import judge_template
    from opbench.run.warm_up import WARM_BY_SUITE

    started: list[tuple] = []
    monkeypatch.setattr(judge_template, "start", lambda *a: started.append(a))
    monkeypatch.delenv("OPBENCH_PLAN_IN", raising=False)
    judge_template.start_for_run("cpu", "opinfo")
    assert started == []
    judge_template.start_for_run("cuda:1", "opinfo")
    judge_template.start_for_run("cuda", "traces:../shared/traces")
    assert started == [("cuda:1", WARM_BY_SUITE["opinfo"]), ("cuda", ())]


def test_warm_entries_import_modules_and_call_functions(monkeypatch):
    from opbench.run.warm_up import warm_up

    calls: list[int] = []
    monkeypatch.setattr(sys.modules[__name__], "poison_forks", lambda: calls.append(1))
    warm_up(["json", f"{__name__}:poison_forks"])
    assert calls == [1]
    with pytest.raises(ModuleNotFoundError):
        warm_up(["opbench.no_such_module"])


def test_judge_forks_0_spawns_every_judging_process_and_starts_no_template(monkeypatch):
    from opbench.run import judge_template

    monkeypatch.setenv("OPBENCH_JUDGE_FORKS", "0")
    monkeypatch.setattr(judge_template, "_state", {"started": False, "refused": ""})
    assert judge_template.context("cuda:0").get_start_method() == "spawn"
    assert judge_template._state["started"] is False  # no template launched
    monkeypatch.setenv("OPBENCH_JUDGE_FORKS", "yes")
    with pytest.raises(ValueError, match="OPBENCH_JUDGE_FORKS"):
        judge_template.forks_wanted()


def test_a_runs_recorded_flags_leave_out_the_templates_own_settings(monkeypatch):
    """``env.flags`` lists what the user set; the template's settings are opbench's."""
    from opbench.run.judge_template import TEMPLATE_ENV
    from opbench.run.machine import environment

    monkeypatch.setenv(TEMPLATE_ENV, '{"device": "cpu", "warm": []}')
    monkeypatch.setenv("OPBENCH_PLAN_IN", "process")
    flags = environment("cpu")["flags"]
    assert flags.get("OPBENCH_PLAN_IN") == "process" and TEMPLATE_ENV not in flags
