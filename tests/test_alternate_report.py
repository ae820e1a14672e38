"""``benchmarks/reproduce/alternate_report.py``: two backends' runs in turns, read from
real result stores; a side is ahead on an op only where every one of its runs is above
every run of the other, over the tests that passed in every run."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from opbench.run.store import ResultStore, TestResult

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "reproduce" / "alternate_report.py"
sys.path.insert(0, str(SCRIPT.parent))

import alternate_report as ar  # noqa: E402


def _run(tmp: Path, name: str, speedups: dict[tuple[str, str], float | None]) -> Path:
    """A run directory whose store holds one passed test per (op, args) at that device
    speedup (host: twice it), or a failed one where it is None."""
    d = tmp / name
    d.mkdir()
    store = ResultStore(d / "results.sqlite")
    for i, ((op, args), s) in enumerate(speedups.items()):
        store.add(TestResult(
            test_id=f"{op}:{i}", op=op, args=args, status="passed" if s else "failed",
            speedup=s, speedup_host=2 * s if s else None,
        ))  # fmt: skip
    store.close()
    return d


A, B, C = ("relu.default", "x"), ("relu.default", "y"), ("add.Tensor", "z")


def test_ahead_only_where_every_run_is_above_every_run_of_the_other(tmp_path: Path) -> None:
    ours = [_run(tmp_path, "o1", {A: 1.0, B: 1.0, C: 1.10}),
            _run(tmp_path, "o2", {A: 1.02, B: 1.02, C: 1.00})]  # fmt: skip
    theirs = [_run(tmp_path, "t1", {A: 1.05, B: 1.05, C: 1.05}),
              _run(tmp_path, "t2", {A: 1.04, B: 1.04, C: 1.05})]  # fmt: skip
    r = ar.compare([ar.read_run(d) for d in ours], [ar.read_run(d) for d in theirs])
    assert r["ops"]["relu.default"]["verdict"] == "theirs"  # 1.04-1.05 above 1.00-1.02
    assert r["ops"]["relu.default"]["ours"] == pytest.approx([1.0, 1.02])
    assert r["ops"]["add.Tensor"]["verdict"] == "overlap"  # 1.05 between 1.00 and 1.10
    assert r["chance"] == pytest.approx(1 / 6)
    host = ar.compare([ar.read_run(d, "host") for d in ours],
                      [ar.read_run(d, "host") for d in theirs])  # fmt: skip
    assert host["ops"]["relu.default"]["theirs"] == pytest.approx([2.1, 2.08])


def test_a_test_failed_in_any_run_is_left_out_of_every_run(tmp_path: Path) -> None:
    ours = [
        _run(tmp_path, "o1", {A: 1.2, B: 0.5, C: 1.0}),
        _run(tmp_path, "o2", {A: 1.2, B: 0.5, C: None}),
    ]
    theirs = [
        _run(tmp_path, "t1", {A: 1.1, B: None, C: 1.0}),
        _run(tmp_path, "t2", {A: 1.1, B: 9.0, C: 1.0}),
    ]
    r = ar.compare([ar.read_run(d) for d in ours], [ar.read_run(d) for d in theirs])
    # relu over A alone (B failed in t1): ours 1.2 in both runs, above 1.1
    assert r["ops"]["relu.default"] == {"tests": 1, "ours": [1.2, 1.2], "theirs": [1.1, 1.1],
                                       "verdict": "ours"}  # fmt: skip
    assert "add.Tensor" not in r["ops"] and r["left_out"] == ["add.Tensor"]


def test_the_script_writes_the_table_and_refuses_a_folder_without_a_store(tmp_path: Path) -> None:
    o = [_run(tmp_path, f"o{i}", {A: 1.0 + i / 100}) for i in range(3)]
    t = [_run(tmp_path, f"t{i}", {A: 1.1 + i / 100}) for i in range(3)]
    out = tmp_path / "alt"
    cmd = [sys.executable, str(SCRIPT), "--ours", *map(str, o), "--theirs", *map(str, t),
           "--names", "triton,flag_gems", "--out", str(out)]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    text = out.with_suffix(".md").read_text()
    assert (
        "| relu.default | 1 | 1.000 / 1.010 / 1.020 | 1.100 / 1.110 / 1.120 | flag_gems |" in text
    )
    assert f"{1 / math.comb(6, 3):.1%}" in text  # three runs a side: 5.0%
    assert (
        json.loads(out.with_suffix(".json").read_text())["ops"]["relu.default"]["verdict"]
        == "theirs"
    )
    bad = subprocess.run(
        [*cmd[:3], str(tmp_path / "nowhere"), *cmd[4:]], capture_output=True, text=True
    )
    assert bad.returncode != 0 and "no results.sqlite" in bad.stderr
