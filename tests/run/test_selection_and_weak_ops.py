"""Which tests ``--limit-per-op`` picks, and how ops with only weak tests are scored."""

from __future__ import annotations

from opbench.run.session import RunRequest, SuiteSelection, select_cases, summarize
from opbench.run.store import TestResult
from opbench.suites.case import Case


def test_limit_per_op_prefers_cases_with_elements_over_zero_size_ones():
    cases = [
        Case(op="floor.default", args="((T([0], f32),), {})", count=50),
        Case(op="floor.default", args="((T([8, 8], f32),), {})", count=3),
        Case(op="relu.default", args="((T([4], f32),), {})", count=9),
    ]
    sel = select_cases(RunRequest(suite="traces", backend="aten", limit_per_op=1), cases)
    assert [c.args for c in sel.cases if c.op == "floor.default"] == ["((T([8, 8], f32),), {})"]
    # without a limit every case runs, in the suite's order
    sel_all = select_cases(RunRequest(suite="traces", backend="aten"), cases)
    assert [c.args for c in sel_all.cases] == [c.args for c in cases]


def _result(op: str, status: str = "passed", weak: bool = False) -> TestResult:
    return TestResult(test_id=f"{op}-{status}-{weak}", op=op, status=status, weak=weak)


def test_op_with_only_weak_tests_has_no_verdict_and_leaves_the_denominator(tmp_path):
    req = RunRequest(suite="traces", backend="aten")
    sel = SuiteSelection(cases=[], asked_ops={"relu.default", "nonzero.default"})
    results = [_result("relu.default"), _result("nonzero.default", weak=True)]
    summary = summarize(req, sel, results, tmp_path)
    assert summary["correctness_score"] == 1.0
    assert summary["ops_in_denominator"] == 1
    assert "aten.nonzero.default" in summary["not_tested"]
    assert "only weak tests" in summary["not_tested"]["aten.nonzero.default"]


def test_a_failing_test_beside_weak_ones_still_counts_against_the_op(tmp_path):
    req = RunRequest(suite="traces", backend="aten")
    sel = SuiteSelection(cases=[], asked_ops={"relu.default"})
    results = [_result("relu.default", weak=True), _result("relu.default", status="failed")]
    summary = summarize(req, sel, results, tmp_path)
    assert summary["correctness_score"] == 0.0
    assert summary["ops"]["aten.relu.default"]["correct"] is False


def test_op_whose_every_test_was_skipped_leaves_the_denominator(tmp_path):
    req = RunRequest(suite="traces", backend="aten")
    sel = SuiteSelection(cases=[], asked_ops={"relu.default", "_cudnn_rnn.default"})
    skipped = TestResult(
        test_id="rnn", op="_cudnn_rnn.default", status="skipped", message="random op"
    )
    summary = summarize(req, sel, [_result("relu.default"), skipped], tmp_path)
    assert summary["correctness_score"] == 1.0
    assert "random op" in summary["not_tested"]["aten._cudnn_rnn.default"]


def test_coverage_counts_overloads_operators_dtypes_and_variants():
    cases = [
        Case(op="add.Tensor", args="((T([4], f32), T([4], f32)), {})"),
        Case(op="add_.Tensor", args="((T([4], bf16), T([4], bf16)), {})"),
        Case(op="add.out", args="((T([4], f32), T([4], f32)), {'out': T([4], f32)})"),
        Case(op="_softmax.default", args="((T([4, 4], f16), 1, False), {})"),
    ]
    cov = select_cases(RunRequest(suite="traces", backend="aten"), cases).coverage
    assert cov["tests"] == 4 and cov["overloads"] == 4
    assert cov["operators"] == 2  # add, add_ and add.out are one operator; _softmax another
    assert cov["by_dtype"] == {"f32": 2, "bf16": 1, "f16": 1}
    assert cov["by_variant"] == {"functional": 2, "inplace": 1, "out": 1}
