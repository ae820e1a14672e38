"""Worker names say where a worker ran: node, device, process, counter (issue #35: every
worker of every Ray node was ``worker-1``). Two Ray actors' workers:
``tests/run/test_ray_parity.py``."""

from __future__ import annotations

import os

from opbench.run.pool import worker_name


def test_names_carry_node_device_process_and_a_counter() -> None:
    node = os.uname().nodename.split(".")[0]
    a, b = worker_name("cpu"), worker_name("cpu")
    assert a != b
    for name in (a, b):
        assert name.startswith(f"{node}.cpu.p{os.getpid()}.worker-"), name
    assert int(b.rsplit("-", 1)[1]) > int(a.rsplit("-", 1)[1])  # one counter per process


def test_a_renumbered_gpu_is_named_by_its_physical_index(monkeypatch) -> None:
    """Ray gives each actor its GPU as ``cuda:0`` through ``CUDA_VISIBLE_DEVICES``."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    assert ".cuda5.p" in worker_name("cuda:1")
    assert ".cuda3.p" in worker_name("cuda")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert ".cuda1.p" in worker_name("cuda:1")


class _Cluster:
    """What ``RayExecutor._slots`` asks of Ray: the cluster's resources."""

    def __init__(self, gpus: int, cpus: int) -> None:
        self.resources = {"GPU": float(gpus), "CPU": float(cpus)}

    def cluster_resources(self) -> dict[str, float]:
        return self.resources


def _slots(workers: int, device: str, gpus: int = 4, cpus: int = 8) -> int:
    from types import SimpleNamespace

    from opbench.run.ray_executor import RayExecutor

    executor = RayExecutor.__new__(RayExecutor)  # only the request is read
    executor.req = SimpleNamespace(workers=workers, device=device)
    return executor._slots(_Cluster(gpus, cpus))


def test_ray_takes_the_slots_it_is_told_and_the_whole_cluster_by_default() -> None:
    """``--workers 1`` with Ray meant the whole cluster, as 1 was the default (a CPU run
    asked for one slot got two, 2026-11-28); now the option's absence (0) does."""
    from opbench.commands.run import _workers

    assert _workers(None, "ray") == 0 and _workers(None, "local") == 1
    assert _workers(1, "ray") == 1 and _workers(3, "local") == 3
    assert _slots(0, "cuda") == 4 and _slots(0, "cpu") == 8
    assert _slots(1, "cuda") == 1
    assert _slots(2, "cpu") == 2
    assert _slots(6, "cuda") == 4  # no more than the cluster holds actors for
