"""Workers and the judging process share the cores instead of each taking all of them."""

from __future__ import annotations

from opbench.run.pool import WorkerConfig
from opbench.run.setup import RunRequest, cpu_share, worker_config


def test_cpu_share_divides_the_cores_between_workers_and_the_judge(monkeypatch):
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(32)))
    assert cpu_share(1) == 16
    assert cpu_share(2) == 10
    assert cpu_share(64) == 1  # never zero


def test_local_workers_are_told_their_share_and_ray_tasks_are_not():
    from opbench.spec.judge_options import JudgeOptions

    local = worker_config(RunRequest(suite="smoke", backend="aten", workers=2), JudgeOptions())
    assert local.threads == cpu_share(2)
    assert local.message("cpu")["threads"] == cpu_share(2)
    ray = worker_config(RunRequest(suite="smoke", backend="aten", executor="ray"), JudgeOptions())
    assert ray.threads is None
    assert WorkerConfig(backend="aten", device="cpu").message("cpu")["threads"] is None
