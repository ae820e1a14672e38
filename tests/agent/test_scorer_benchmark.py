"""``benchmarks/reproduce/scorer_throughput.py`` runs on the CPU as CI has it: a few
candidates through ``Scorer.score_many`` with one and two lanes. Its numbers are printed
(``pytest -s`` shows them), not asserted: CI's machine is shared."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def test_the_scorer_benchmark_runs_and_reports_its_throughput() -> None:
    cmd = [
        sys.executable, str(ROOT / "benchmarks/reproduce/scorer_throughput.py"),
        "--device", "cpu", "--suite", "smoke", "--workers", "1,2", "--batch", "2", "--n", "4",
        "--no-write",
    ]  # fmt: skip
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout)
    assert [r["lanes"] for r in out["runs"]] == [1, 2]
    for r in out["runs"]:
        assert r["candidates"] == 4 and r["tests_passed"] == r["tests_per_candidate"] > 0
        assert r["candidates_per_s"] > 0 and 0 <= r["outside_tests_share"] <= 1
    print("scorer on this CPU:", {r["lanes"]: r["candidates_per_s"] for r in out["runs"]})


def test_the_benchmark_runs_through_host_scorers() -> None:
    """``--hosts``: the same candidates through ``opbench.HostScorers`` on the local Ray."""
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'opbench[ray]')")
    cmd = [
        sys.executable, str(ROOT / "benchmarks/reproduce/scorer_throughput.py"),
        "--device", "cpu", "--suite", "smoke", "--workers", "1", "--hosts", "2", "--batch", "4",
        "--n", "4", "--no-write",
    ]  # fmt: skip
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    (run,) = json.loads(p.stdout)["runs"]
    assert run["hosts"] == 2 and run["lanes_in_all"] == 2 and len(run["per_host"]) == 2
    assert run["candidates"] == 4 and run["tests_passed"] == run["tests_per_candidate"] > 0
    assert sum(h["candidates"] for h in run["per_host"]) == 4
    print("host scorers on this CPU:", run["candidates_per_s"])
