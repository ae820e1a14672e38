"""A test the harness cannot plan or judge is that test's ``judge_error``, never the run's.

Before this, one OpInfo case whose input digest raised in the harness (a one-element f16
tensor with an odd stride) ended a whole H100 run. Here the harness's own planning and
judging are made to raise for chosen tests: those tests are recorded as ``judge_error``
with the exception, the others complete and pass, the scores leave the broken tests out,
and ``opbench run`` exits 3 (incomplete).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

import opbench.judge.evaluate as evaluate
from opbench.cli import app
from opbench.commands.run import INCOMPLETE
from opbench.report.html import render
from opbench.report.tables import print_summary
from opbench.run.session import RunRequest, SuiteSelection, summarize
from opbench.run.store import ResultStore, TestResult

TRACES = """Operator: aten.relu.default
cnt: 1, ((T([4, 8], f32),), {})
cnt: 1, ((T([5, 8], f32),), {})
cnt: 1, ((T([6, 8], f32),), {})
Operator: aten.neg.default
cnt: 1, ((T([7, 8], f32),), {})
"""


def _invoke(*args: str):
    return CliRunner().invoke(app, ["run", "--no-perf", *args], env={"COLUMNS": "300"})


def _raise_for(real, shape: str, what: str):
    """``real`` wrapped to raise for the case whose arguments hold ``shape``."""

    def wrapped(case, *args, **kwargs):
        if shape in case.args:
            raise RuntimeError(f"{what} broke on purpose for {case.test_id}")
        return real(case, *args, **kwargs)

    return wrapped


@pytest.mark.slow
def test_planning_and_judging_errors_are_their_tests_results(tmp_path, monkeypatch):
    traces = tmp_path / "t.txt"
    traces.write_text(TRACES)
    out = tmp_path / "run"
    # neg's one test cannot be planned; one of relu's three cannot be judged
    monkeypatch.setattr(
        evaluate, "plan_trials", _raise_for(evaluate.plan_trials, "[7, 8]", "planning")
    )
    monkeypatch.setattr(
        evaluate, "judge_report", _raise_for(evaluate.judge_report, "[5, 8]", "judging")
    )
    t0 = time.perf_counter()
    result = _invoke(
        "--suite", f"traces:{traces}", "--backend", "aten", "--device", "cpu",
        "--sandbox", "off", "--out", str(out),
    )  # fmt: skip
    elapsed = time.perf_counter() - t0
    assert result.exit_code == INCOMPLETE == 3, result.output
    assert "incomplete" in result.output and "judge_error" in result.output

    summary = json.loads((out / "summary.json").read_text())
    assert summary["tests"]["total"] == 4
    assert summary["tests"]["by_status"] == {"judge_error": 2, "passed": 2}
    assert summary["judge_errors"] == 2
    assert summary["judge_errors_by_op"] == {"aten.neg.default": 1, "aten.relu.default": 1}
    # relu is judged on its two other tests; neg, with none left, is not tested
    assert summary["correctness_score"] == 1.0 and summary["ops_in_denominator"] == 1
    relu = summary["ops"]["aten.relu.default"]
    assert relu["tests"] == 2 and relu["passed"] == 2 and relu["judge_errors"] == 1
    assert relu["failures"] == {}
    assert "judge_error" in summary["not_tested"]["aten.neg.default"]

    store = ResultStore(out / "results.sqlite")
    try:
        broken = {r.op: r for r in store.results() if r.status == "judge_error"}
    finally:
        store.close()
    plan, judge = broken["neg.default"], broken["relu.default"]
    assert plan.category == "judge_error" and judge.category == "judge_error"
    assert plan.details["stage"] == "plan" and judge.details["stage"] == "judge"
    assert "planning broke on purpose" in plan.message
    assert "judging broke on purpose" in judge.message
    assert "RuntimeError" in plan.details["traceback"]
    assert "wrapped" in judge.details["traceback"]  # where it was raised
    assert "Judge errors (2)" in (out / "report.html").read_text()
    assert elapsed < 60, elapsed


@pytest.mark.slow
def test_a_complete_run_still_exits_0(tmp_path):
    traces = tmp_path / "t.txt"
    traces.write_text("Operator: aten.relu.default\ncnt: 1, ((T([4, 8], f32),), {})\n")
    out = tmp_path / "run"
    result = _invoke(
        "--suite", f"traces:{traces}", "--backend", "aten", "--device", "cpu",
        "--sandbox", "off", "--out", str(out),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["judge_errors"] == 0 and summary["judge_errors_by_op"] == {}


def _result(op: str, status: str, category: str | None = None, i: int = 0) -> TestResult:
    return TestResult(test_id=f"{op}-{status}-{i}", op=op, status=status, category=category)


def test_judge_errors_never_count_against_the_backend(tmp_path):
    """An op whose every other test passed stays correct; one whose every test is a
    judge_error leaves the denominator; a real failure beside a judge_error still
    counts."""
    req = RunRequest(suite="traces", backend="aten")
    ops = {"relu.default", "neg.default", "abs.default"}
    results = [
        _result("relu.default", "passed"),
        _result("relu.default", "judge_error", "judge_error", 1),
        _result("neg.default", "judge_error", "judge_error"),
        _result("abs.default", "failed", "wrong_result"),
        _result("abs.default", "judge_error", "judge_error", 1),
    ]
    summary = summarize(req, SuiteSelection(cases=[], asked_ops=ops), results, tmp_path)
    assert summary["ops_in_denominator"] == 2
    assert summary["correctness_score"] == 0.5
    assert summary["ops"]["aten.relu.default"]["correct"] is True
    assert summary["ops"]["aten.abs.default"]["failures"] == {"wrong_result": 1}
    assert "aten.neg.default" in summary["not_tested"]
    assert summary["judge_errors"] == 3
    assert summary["tests"]["by_category"]["judge_error"] == 3


def test_the_terminal_table_names_the_judge_errors(tmp_path):
    from rich.console import Console

    req = RunRequest(suite="traces", backend="aten")
    results = [
        _result("relu.default", "passed"),
        _result("relu.default", "judge_error", "judge_error", 1),
    ]
    summary = summarize(
        req, SuiteSelection(cases=[], asked_ops={"relu.default"}), results, tmp_path
    )
    summary["timing_s"] = {"run": 1.0}
    console = Console(record=True, width=200)
    print_summary(summary, console)
    text = console.export_text()
    assert "judge_error 1 test(s)" in text and "relu.default 1" in text
    assert "Judge errors (1)" in render(summary, results)


@pytest.mark.slow
def test_an_opinfo_full_run_on_cpu_runs_to_its_end(tmp_path):
    """The run that crashed on the H100 planned OpInfo cases whose inputs the digest
    could not read; a full-profile run over a few ops must end, every test judged. On
    the CPU too: 48 inputs of this selection (add and mul, f16, functional and out=)
    made the old digest raise. ~35 s on 2 cores (1760 tests)."""
    pytest.importorskip("expecttest")
    out = tmp_path / "run"
    result = _invoke(
        "--suite", "opinfo", "--profile", "full", "--backend", "aten", "--device", "cpu",
        "--ops", "add,mul,abs,where,cat,sum", "--dtypes", "f16,f32", "--sandbox", "off",
        "--out", str(out),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    summary = json.loads(Path(out / "summary.json").read_text())
    assert summary["judge_errors"] == 0
    assert summary["correctness_score"] == 1.0
    assert summary["tests"]["total"] > 50


@pytest.mark.slow  # over 1.5 s on 2 cores (2026-11-28, --durations)
def test_a_run_with_unfinished_tests_exits_incomplete(tmp_path, monkeypatch):
    """Tests a harness error left unrecorded (``unfinished``, for --resume) make the run
    incomplete, like judge errors: exit 3, whatever the scores."""
    import opbench.run.session as session

    real_run = session.run

    def run_with_a_lost_chunk(req, on_progress=None):
        summary = real_run(req, on_progress)
        summary["unfinished"] = {
            "tests": 1,
            "ops": ["aten.relu.default"],
            "errors": [{"ops": ["relu.default"], "tests": 1, "error": "boom"}],
            "how_to_finish": "run the same command again with --resume",
        }
        return summary

    monkeypatch.setattr(session, "run", run_with_a_lost_chunk)
    traces = tmp_path / "t.txt"
    traces.write_text("Operator: aten.relu.default\ncnt: 1, ((T([4, 8], f32),), {})\n")
    result = _invoke(
        "--suite", f"traces:{traces}", "--backend", "aten", "--device", "cpu",
        "--sandbox", "off", "--out", str(tmp_path / "run"),
    )  # fmt: skip
    assert result.exit_code == 3, result.output
    assert "--resume" in result.output
