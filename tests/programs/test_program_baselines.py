"""``benchmarks/reproduce/program_baselines.py``: baselines are timed in training mode, as KernelBench
and opbench's judge run problems; journal rows an earlier version timed after ``.eval()``
are timed again when eval mode changes the problem's computation, and the report marks
them and leaves them out of its counts."""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path

from opbench.programs import loader

ROOT = Path(__file__).resolve().parents[2]
PROBLEM = """import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = {layer}

    def forward(self, x):
        return self.layer(x)

def get_inputs():
    return [torch.randn(8, 3, 4, 4)]

def get_init_inputs():
    return []
"""


def _script():
    path = ROOT / "benchmarks/reproduce/program_baselines.py"
    spec = importlib.util.spec_from_file_location("program_baselines", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _row(pid: str, eager: float, compiled: float, **extra) -> dict:
    level, name = pid.split("/")
    kb = {"mean": eager, "std": 0.0, "trials": 100}
    return {"id": pid, "level": level[len("level"):], "file": name + ".py", "status": "ok",
            "eager_ms": eager, "compile_ms": compiled, "compile_speedup": eager / compiled,
            "kb_style_eager": kb, "kb_style_compile": kb, **extra}  # fmt: skip


def _suite(tmp_path: Path) -> Path:
    suite = tmp_path / "suite"
    (suite / "level1").mkdir(parents=True)
    (suite / "level1/1_bn.py").write_text(PROBLEM.format(layer="nn.BatchNorm2d(3)"))
    (suite / "level1/2_relu.py").write_text(PROBLEM.format(layer="nn.ReLU()"))
    (suite / "level1/3_bn.py").write_text(PROBLEM.format(layer="nn.BatchNorm2d(3)"))
    return suite


def _report(pb, tmp_path: Path, rows: list[dict], command: str | None = None) -> Path:
    """Write ``rows`` as a journal (with the command that filled it, if given) over the
    test suite and run the script's report on it: the report's path without suffix."""
    suite = _suite(tmp_path)
    journal = tmp_path / "bl.jsonl"
    journal.write_text("".join(json.dumps(r) + "\n" for r in rows))
    if command is not None:
        journal.with_suffix(".env.json").write_text(json.dumps({"command": command}))
    out = tmp_path / "report"
    args = argparse.Namespace(
        journal=str(journal), suite=str(suite), size="full", published=None, out=str(out),
        title="t",
    )  # fmt: skip
    pb.report(args)
    return out


def test_eval_mode_rows_are_marked_and_left_out_of_the_scores(tmp_path):
    pb = _script()
    rows = [
        _row("level1/1_bn", 1.0, 0.5),  # no mode: timed after .eval(), and BN changes
        _row("level1/2_relu", 2.0, 1.0),  # no mode, but eval mode changes nothing
        _row("level1/3_bn", 4.0, 1.0, mode="train", mode_dependent=["BatchNorm2d"]),
    ]
    out = _report(pb, tmp_path, rows)
    data = json.loads(out.with_suffix(".json").read_text())
    assert data["summary"]["timed_in_eval_mode"] == 1
    # the geomean of the two rows that time the problem's own computation: 2x and 4x
    assert abs(data["summary"]["compile_speedup_geomean"] - 8**0.5) < 1e-9
    table = out.with_suffix(".md").read_text()
    bn_line = next(ln for ln in table.splitlines() if ln.startswith("| level1/1_bn "))
    assert "timed in eval mode (BatchNorm2d)" in bn_line
    assert "eval mode" not in next(ln for ln in table.splitlines() if "level1/3_bn" in ln)


def test_rows_timed_in_eval_mode_are_scheduled_again_only_where_it_matters(tmp_path):
    pb = _script()
    problems = {p.problem_id: p for p in loader.discover(_suite(tmp_path))}
    old_bn = _row("level1/1_bn", 1.0, 0.5)
    old_relu = _row("level1/2_relu", 1.0, 0.5)
    new_bn = _row("level1/3_bn", 1.0, 0.5, mode="train")
    assert pb._timed_in_eval_mode(old_bn, problems["level1/1_bn"], None)
    assert not pb._timed_in_eval_mode(old_relu, problems["level1/2_relu"], None)
    assert not pb._timed_in_eval_mode(new_bn, problems["level1/3_bn"], None)


def test_a_committed_result_becomes_a_journal_that_reruns_only_stale_rows(tmp_path):
    """A fresh GPU machine has no journal: --resume-from rebuilds it from the committed
    report, whose rows already marked as timed in eval mode are timed again."""
    pb = _script()
    rows = [_row("level1/1_bn", 1.0, 0.5), _row("level1/2_relu", 2.0, 1.0)]
    out = _report(pb, tmp_path, rows, command="first call")
    fresh = tmp_path / "fresh/bl.jsonl"
    assert pb.journal_from_result(out.with_suffix(".json"), fresh) == 2
    again = {r["id"]: r for r in map(json.loads, fresh.read_text().splitlines())}
    assert again["level1/2_relu"]["eager_ms"] == 2.0
    assert not any(k.startswith(("pub_", "ratio_", "why_")) for r in again.values() for k in r)
    assert json.loads(fresh.with_suffix(".env.json").read_text())["commands"] == ["first call"]
    problems = {p.problem_id: p for p in loader.discover(tmp_path / "suite")}
    assert pb._timed_in_eval_mode(again["level1/1_bn"], problems["level1/1_bn"], None)
    assert not pb._timed_in_eval_mode(again["level1/2_relu"], problems["level1/2_relu"], None)
