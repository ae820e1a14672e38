"""The GPU benchmarks' runner (``benchmarks/reproduce/gpu_workers.run``), on the CPU: a
second run into the same scratch directory is a run, not opbench's refusal of a directory
that holds results (which a 4 x H100 call reported as a 4 s run, 2026-11-27)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_a_run_into_an_earlier_runs_directory_runs_again(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks" / "reproduce"))
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])
    )
    import gpu_workers

    args = ["--suite", "opinfo", "--backend", "aten", "--device", "cpu", "--ops", "add.Tensor",
            "--dtypes", "f32", "--limit-per-op", "2", "--no-perf"]  # fmt: skip
    out = tmp_path / "local-1"
    first = gpu_workers.run(args, out, 300)
    second = gpu_workers.run(args, out, 300)
    assert first["rc"] == 0 and second["rc"] == 0, (
        first.get("output_tail"),
        second.get("output_tail"),
    )
    assert second["tests_recorded"] == first["tests_recorded"] > 0
    assert second["by_device"]["cpu"]["tests"] == second["tests_recorded"]
    sys.modules.pop("gpu_workers", None)


def test_each_gpus_share_of_a_run_is_counted(monkeypatch) -> None:
    import sqlite3

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks" / "reproduce"))
    import gpu_scaling
    import gpu_workers

    con = sqlite3.connect(":memory:")
    con.execute("create table results (device text, duration_s real, finished_at real)")
    con.executemany(
        "insert into results values (?, ?, ?)",
        [("cuda:0", 1.0, 100.0), ("cuda:1", 2.5, 101.0), ("cuda:0", 0.5, 130.0)],
    )
    loads = gpu_workers.device_loads(con)
    assert loads == {
        "cuda:0": {"tests": 2, "worker_s": 1.5, "last_result_s": 30.0},
        "cuda:1": {"tests": 1, "worker_s": 2.5, "last_result_s": 1.0},
    }
    assert gpu_scaling._loads({"by_device": loads}, "tests") == "2 / 1"
    assert gpu_scaling._loads({}, "tests") == "-"
    for name in ("gpu_workers", "gpu_scaling"):
        sys.modules.pop(name, None)


def test_the_gpu_scripts_call_timers_that_exist() -> None:
    """The GPU-only scripts cannot run here, so a misspelt timer waits for a lent GPU to
    fail: ``matmul_timing.bench`` called ``triton.testing.dobench`` (not ``do_bench``)
    from 2026-11-27 until a review found it on 2026-11-28."""
    import re

    import triton.testing

    names: dict[str, list[str]] = {}
    for path in sorted((ROOT / "benchmarks").rglob("*.py")):
        for name in re.findall(r"\btriton\.testing\.([A-Za-z_]\w*)", path.read_text()):
            names.setdefault(name, []).append(path.name)
    assert names, "no script names a timer: the check reads nothing"
    missing = {n: files for n, files in names.items() if not hasattr(triton.testing, n)}
    assert not missing, missing


def test_the_benchmarks_name_only_what_opbench_has() -> None:
    """Every ``from opbench... import NAME`` in ``benchmarks/`` resolves, and every
    ``module.NAME`` read through an opbench module imported so: most of these scripts
    run only on a lent GPU, where a name a refactor renamed would fail first."""
    import ast
    import importlib
    import importlib.util
    import types

    missing: list[str] = []
    checked = 0
    for path in sorted((ROOT / "benchmarks").rglob("*.py")):
        tree = ast.parse(path.read_text())
        modules: dict[str, types.ModuleType] = {}
        for node in ast.walk(tree):
            if not (isinstance(node, ast.ImportFrom) and (node.module or "").startswith("opbench")):
                continue
            mod = importlib.import_module(node.module or "")
            for alias in node.names:
                checked += 1
                full = f"{node.module}.{alias.name}"
                if hasattr(mod, alias.name):
                    obj = getattr(mod, alias.name)
                elif importlib.util.find_spec(full) is not None:
                    obj = importlib.import_module(full)
                else:
                    missing.append(f"{path.name}:{node.lineno} {full}")
                    continue
                if isinstance(obj, types.ModuleType):
                    modules[alias.asname or alias.name] = obj
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in modules
            ):
                checked += 1
                if not hasattr(modules[node.value.id], node.attr):
                    missing.append(f"{path.name}:{node.lineno} {node.value.id}.{node.attr}")
    assert checked > 200, checked  # the scripts were read
    assert not missing, missing
