"""``benchmarks/reproduce/heldout_report.py``: a judged run's store summarised against issue
#36's targets, on a store written here (no GPU): the host numbers count only tests where
eager takes >= 20 us, the route of each test is read from its ``call_route``, and the
lowest host ratios name why a declared kernel was called as its Python function."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "reproduce" / "heldout_report.py"

WHY = "a trial call reached the Python function through the gate"
#: (op, args, eager host ms, host speedup, device speedup, call_route)
TESTS = [
    ("mul.Tensor", "((T([8, 128, 1024], f16), 0.125), {})", 0.036, 0.63, 1.0,
     {"route": "python", "why": WHY}),
    ("add.Tensor", "((T([8, 128, 1024], f16), T([8, 128, 1024], f16)), {})", 0.025, 1.2, 1.1,
     {"route": "native", "op": "opbench_candidate::add.Tensor"}),
    ("div.Tensor", "((T([16, 128, 768], f16), T([16, 128, 1], f16)), {})", 0.023, 0.44, 1.25,
     None),
    ("relu.default", "((T([4], f16),), {})", 0.010, 0.2, 1.0, None),  # eager under 20 us
    ("mm.default", "((T([1024, 1024], f16), T([1024, 1024], f16)), {})", 0.034, 0.97, 0.95,
     None),
    ("native_layer_norm.default", "((T([8, 128, 1024], f16), [1024], None, None, 1e-05), {})",
     0.021, 1.05, 1.2, {"route": "native", "op": "opbench_candidate::native_layer_norm",
                        "replay": True, "counts": {"native": 40, "python": 0, "replayed": 40}}),
]  # fmt: skip


def _store(run: Path, tests: list | None = None) -> None:
    run.mkdir()
    db = sqlite3.connect(run / "results.sqlite")
    db.execute(
        "create table results (op, args, status, category, speedup, speedup_host, "
        "ref_host_ms, ref_device_ms, message, details)"
    )
    for op, args, host_ms, host, device, route in TESTS if tests is None else tests:
        details = json.dumps({"call_route": route} if route else {})
        db.execute("insert into results values (?, ?, 'passed', '', ?, ?, ?, 0.01, '', ?)",
                   (op, args, device, host, host_ms, details))  # fmt: skip
    db.commit()
    db.close()


def test_the_report_counts_the_slow_host_tests_by_route_and_names_the_lowest(tmp_path):
    run = tmp_path / "run"
    _store(run)
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(run), "--command", "opbench run ...", "--gpu", "h200",
         "--out-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((tmp_path / "triton-heldout-h200.json").read_text())
    assert summary["tests_eager_ge_20us"] == 5  # relu's 10 us call is not counted
    by_route = summary["host_by_route_eager_ge_20us"]
    assert by_route["native"]["tests"] == 1 and by_route["python"]["tests"] == 3
    assert by_route["replay"] == {"tests": 1, "host_geomean": 1.05}
    assert summary["matmul_ge_1gflop"]["tests"] == 1
    md = (tmp_path / "triton-heldout-h200.md").read_text()
    table = md[md.index("Lowest host ratios") :].splitlines()
    rows = [x for x in table if x.startswith("| ") and "---" not in x][1:]
    assert [r.split(" | ")[0].removeprefix("| ") for r in rows] == [
        "div.Tensor", "mul.Tensor", "mm.default", "native_layer_norm.default", "add.Tensor"]  # fmt: skip
    assert rows[1].endswith(f"python: {WHY} |") and rows[4].endswith("| native |")
    assert rows[3].endswith("| replay |")


def _report(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args, "--gpu", "h200", "--out-dir",
                           str(tmp_path)], capture_output=True, text=True, timeout=120)  # fmt: skip


def test_parts_of_a_run_merge_into_the_report_of_the_whole(tmp_path):
    """``--merge``: the reports of two parts of a run (``opbench run --shard K/N``) give
    the numbers the whole run's store gives; a part cut short makes the merged report
    partial; a test in two parts, or a part without per-test rows, is refused by name."""
    whole, one, two = tmp_path / "whole", tmp_path / "one", tmp_path / "two"
    _store(whole)
    _store(one, TESTS[:3])
    _store(two, TESTS[3:])
    for run, name, extra in ((whole, "whole", []), (one, "p1", []), (two, "p2", ["--partial"])):
        done = _report(tmp_path, str(run), "--command", f"run {name}", "--name", name, *extra)
        assert done.returncode == 0, done.stderr[-2000:]
    full = json.loads((tmp_path / "triton-heldout-h200-whole.json").read_text())
    p1, p2 = (
        tmp_path / "triton-heldout-h200-p1.json",
        tmp_path / "triton-heldout-h200-p2-partial.json",
    )
    done = _report(tmp_path, "--merge", str(p1), str(p2), "--name", "merged")
    assert done.returncode == 0, done.stderr[-2000:]
    merged = json.loads((tmp_path / "triton-heldout-h200-merged-partial.json").read_text())
    drop = ("command", "partial", "parts", "rows")
    assert {k: v for k, v in merged.items() if k not in drop} == {
        k: v for k, v in full.items() if k not in drop}  # fmt: skip
    assert sorted(map(str, merged["rows"])) == sorted(map(str, full["rows"]))
    assert merged["partial"] and [p["partial"] for p in merged["parts"]] == [False, True]
    assert merged["command"] == "run p1 + run p2"
    md = (tmp_path / "triton-heldout-h200-merged-partial.md").read_text()
    assert "merged from 2 parts" in md and "| no (cut short) |" in md
    twice = _report(tmp_path, "--merge", str(p1), str(p1), "--name", "twice")
    assert twice.returncode != 0 and "is in both" in twice.stderr
    old = tmp_path / "old.json"
    old.write_text(json.dumps({k: v for k, v in full.items() if k != "rows"}))
    done = _report(tmp_path, "--merge", str(old), "--name", "old")
    assert done.returncode != 0 and "no per-test rows" in done.stderr
    tuning = _report(tmp_path, str(one), "--command", "run t", "--name", "t", "--half", "tuning")
    assert tuning.returncode == 0, tuning.stderr[-2000:]
    t = tmp_path / "triton-tuning-h200-t.json"
    assert json.loads(t.read_text())["split"].endswith("tuning half")
    assert (
        (tmp_path / "triton-tuning-h200-t.md")
        .read_text()
        .startswith("# Triton backend on the tuning half of the traces, H200")
    )
    mixed = _report(tmp_path, "--merge", str(t), str(p2), "--name", "mixed")
    assert mixed.returncode == 2 and "not of the held-out half" in mixed.stderr, mixed.stderr
    neither = _report(tmp_path, "--command", "x")
    assert neither.returncode == 2 and "run directory or --merge" in neither.stderr
