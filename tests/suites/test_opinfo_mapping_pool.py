"""The OpInfo mapping built in several processes gives the serial build's very entries,
in its order (the cache and every suite built from it depend on both)."""

from __future__ import annotations

import json

import pytest
import torch

pytest.importorskip("expecttest", reason="the OpInfo suite needs expecttest")

from opbench.suites import opinfo_mapping_pool  # noqa: E402
from opbench.suites.opinfo_mapping import map_group, mapping_for  # noqa: E402


@pytest.mark.slow
def test_two_processes_map_what_one_does_in_the_same_order() -> None:
    from opbench.suites.opinfo_samples import op_db

    serial = mapping_for("cpu", "sample", torch.float32, frozenset(i.name for i in op_db()))
    lines: list[str] = []
    pooled = opinfo_mapping_pool.build_in_processes(
        "cpu", "sample", torch.float32, 2, map_group, progress=lines.append
    )
    assert pooled is not None and len(serial) > 10_000
    pooled, lost = pooled
    assert lost == []
    assert [json.dumps(e, sort_keys=True) for e in pooled] == [
        json.dumps(e, sort_keys=True) for e in serial
    ]
    assert lines and lines[-1].endswith("in 2 processes") and "/" in lines[-1]


def test_the_process_count_follows_the_variable_and_the_cores(monkeypatch) -> None:
    monkeypatch.setenv("OPBENCH_MAP_JOBS", "3")
    assert opinfo_mapping_pool.map_jobs() == 3
    monkeypatch.delenv("OPBENCH_MAP_JOBS")
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    assert opinfo_mapping_pool.map_jobs() == 1  # a small machine maps in-process
    monkeypatch.setattr("os.cpu_count", lambda: 64)
    assert opinfo_mapping_pool.map_jobs() == 8


def test_a_broken_pool_falls_back_to_the_serial_build(monkeypatch, tmp_path) -> None:
    """mapping_for builds in-process when the pool cannot (a process killed, say)."""
    monkeypatch.setenv("OPBENCH_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("OPBENCH_MAP_JOBS", "2")
    asked = []

    def broken(device, kind, dtype, jobs, map_group, progress=None):
        asked.append(jobs)
        return None

    built = []

    def serial(device, kind, dtype, names=None, progress=None):
        built.append(names)
        return [{"op": "x", "variant": "functional", "args": "", "opinfo": "x", "vtn": "",
                 "index": 0}]  # fmt: skip

    monkeypatch.setattr(opinfo_mapping_pool, "build_in_processes", broken)
    monkeypatch.setattr("opbench.suites.opinfo_mapping._build_mapping", serial)
    entries = mapping_for("cpu", "sample", torch.float64)
    assert asked == [2] and built == [None] and entries[0]["op"] == "x"


@pytest.mark.slow  # waits out a 3 s stall and a process's end: ~8 s on 2 cores
def test_tasks_that_never_answer_are_given_up_and_the_rest_kept() -> None:
    """A process in a GPU kernel that never ends cannot be stopped from inside; the pool
    gives its task up once no task has finished for ``stall_s`` and keeps what finished."""
    import os
    import time

    lines: list[str] = []
    start = time.monotonic()
    results = opinfo_mapping_pool.run_in_processes(
        os.system, [("exit 3",), ("sleep 20",), ("true",)], 2, lines.append, stall_s=3
    )
    assert results == [3 << 8, None, 0]
    assert time.monotonic() - start < 15
    assert "gave no answer in 3 s" in lines[-1] and lines[-1].startswith("2/3 tasks")


def test_an_opinfo_whose_mapping_never_answers_is_left_out_and_not_cached(
    monkeypatch, tmp_path, caplog
) -> None:
    """A mapping task that gives no answer is mapped again one OpInfo a task: only the
    OpInfo that hangs is left out, it is named, and the mapping is kept off disk so that
    a later build tries it again."""
    monkeypatch.setenv("OPBENCH_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("OPBENCH_MAP_JOBS", "2")
    from opbench.suites.opinfo_samples import op_db

    vtn = {}
    for info in op_db():
        vtn.setdefault(info.name, info.variant_test_name)
    hangs = "sin"
    rounds: list[int] = []

    def pool(fn, tasks, jobs, progress=None, *, stall_s=None, **_):
        rounds.append(len(tasks))
        return [
            None
            if hangs in names
            else [
                {
                    "op": f"{n}.x",
                    "variant": "functional",
                    "args": "",
                    "opinfo": n,
                    "vtn": vtn[n],
                    "index": 0,
                }
                for n in names
            ]
            for device, kind, dtype, names in tasks
        ]

    monkeypatch.setattr(opinfo_mapping_pool, "run_in_processes", pool)
    with caplog.at_level("WARNING"):
        entries = mapping_for("cpu", "sample", torch.float64)
    names = {e["opinfo"] for e in entries}
    assert hangs not in names and "cos" in names and "add" in names
    assert len(rounds) == 2 and rounds[1] < rounds[0] * 40  # one OpInfo a task, again
    assert "lacks 1 OpInfo(s)" in caplog.text and f": {hangs};" in caplog.text
    assert not list(tmp_path.glob("opinfo-*.json"))
    # a later build that gets every answer keeps it
    hangs = "no such OpInfo"
    again = mapping_for("cpu", "sample", torch.float64)
    assert "sin" in {e["opinfo"] for e in again} and list(tmp_path.glob("opinfo-*.json"))
