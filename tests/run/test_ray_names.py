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
