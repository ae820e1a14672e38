"""``opbench dataset``: the suite as a table with the published TorchBench fields."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from opbench.suites.traces import (
    DATASET_FIELDS,
    build_trace_cases,
    case_uuid,
    dataset_rows,
    write_dataset,
)

TRACE = """\
Operator: aten.add.Tensor
cnt: 3, ((T([2, 3], f32), T([2, 3], f32)), {})
cnt: 0, ((T([10, 10], f16), T([10, 10], f16)), {})
Operator: aten.bernoulli_.float
cnt: 2, ((T([64, 1, 1, 1], f16), 0.97), {})
Operator: aten.relu.default
cnt: 2, ((T([8, 8], f16),), {})
"""

FIELDS = [
    "uuid", "op_name", "args", "runnable", "included_in_benchmark", "why_excluded", "is_synthetic",
    "runtime_ms", "relative_runtime_to_kernel_launch", "is_overhead_dominated_op", "count",
    "in_models", "in_models_count",
]  # fmt: skip


@pytest.fixture()
def traces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("OPBENCH_CACHE_DIR", str(tmp_path / "cache"))
    root = tmp_path / "traces"
    root.mkdir()
    (root / "m1.txt").write_text(TRACE)
    (root / "m2.txt").write_text(TRACE.replace("cnt: 3", "cnt: 4"))
    return root


def test_rows_have_exactly_the_fields(traces: Path) -> None:
    rows = dataset_rows(build_trace_cases(traces))
    assert list(DATASET_FIELDS) == FIELDS
    assert all(list(r) == FIELDS for r in rows)
    assert len(rows) == 4  # one per distinct (op, args)
    add = next(r for r in rows if r["args"] == "((T([2, 3], f32), T([2, 3], f32)), {})")
    assert add["op_name"] == "aten.add.Tensor" and add["count"] == 7
    assert add["in_models"] == ["m1", "m2"] and add["in_models_count"] == 2
    assert add["included_in_benchmark"] and add["runnable"] and add["why_excluded"] == []
    assert add["runtime_ms"] is None and add["is_overhead_dominated_op"] is None
    syn = next(r for r in rows if r["is_synthetic"])
    assert not syn["included_in_benchmark"] and syn["why_excluded"]
    rnd = next(r for r in rows if r["op_name"] == "aten.bernoulli_.float")
    assert rnd["runnable"] and not rnd["included_in_benchmark"]
    assert all(r["why_excluded"] for r in rows if not r["included_in_benchmark"])


def test_uuid_is_stable_and_distinct() -> None:
    a = case_uuid("add.Tensor", "((T([2], f32),), {})")
    assert a == case_uuid("add.Tensor", "((T([2], f32),), {})")
    assert a != case_uuid("add.Tensor", "((T([3], f32),), {})")
    assert a != case_uuid("sub.Tensor", "((T([2], f32),), {})")
    assert len(a) == 64


def test_parquet_and_json_round_trip(traces: Path, tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    rows = dataset_rows(build_trace_cases(traces))
    pq_path = write_dataset(rows, tmp_path / "out" / "problems.parquet")
    table = pq.read_table(pq_path)
    assert table.column_names == FIELDS
    assert table.to_pylist() == rows
    js = write_dataset(rows, tmp_path / "out" / "problems.json")
    assert json.loads(js.read_text()) == rows
    with pytest.raises(ValueError):
        write_dataset(rows, tmp_path / "out" / "problems.csv")


def test_dataset_output_loads_back_as_traces(traces: Path, tmp_path: Path) -> None:
    rows = dataset_rows(build_trace_cases(traces))
    js = write_dataset(rows, tmp_path / "problems.json")
    again = dataset_rows(build_trace_cases(js))
    assert [(r["uuid"], r["count"], r["in_models"]) for r in again] == [
        (r["uuid"], r["count"], r["in_models"]) for r in rows
    ]


def _app():
    from opbench.cli import app

    return app


def test_cli_writes_the_table(traces: Path, tmp_path: Path) -> None:
    out = tmp_path / "problems.json"
    result = CliRunner().invoke(_app(), ["dataset", str(traces), "-o", str(out)])
    assert result.exit_code == 0, result.output
    rows = json.loads(out.read_text())
    assert len(rows) == 4
    assert "included" in result.output


def test_cli_ops_filter_and_bad_input(traces: Path, tmp_path: Path) -> None:
    out = tmp_path / "relu.json"
    result = CliRunner().invoke(_app(), ["dataset", str(traces), "-o", str(out), "--ops", "relu"])
    assert result.exit_code == 0, result.output
    assert {r["op_name"] for r in json.loads(out.read_text())} == {"aten.relu.default"}
    bad = CliRunner().invoke(_app(), ["dataset", str(traces), "-o", str(tmp_path / "x.csv")])
    assert bad.exit_code == 2
    missing = CliRunner().invoke(_app(), ["dataset", str(tmp_path / "nope"), "-o", str(out)])
    assert missing.exit_code == 2 and "Traceback" not in missing.output
    broken = tmp_path / "broken.txt"
    broken.write_text("Operator: aten.add.Tensor\ncnt: 1, ((T([2], f16),\n")
    result = CliRunner().invoke(_app(), ["dataset", str(broken), "-o", str(out)])
    assert result.exit_code == 2 and "line 2" in result.output


def test_measure_fills_runtimes_of_included_rows_only(tmp_path):
    from opbench.judge.runtimes import fill_runtimes
    from opbench.suites.traces import build_trace_cases, dataset_rows

    trace = tmp_path / "t.txt"
    trace.write_text(
        "Operator: aten.relu.default\n"
        "cnt: 2, ((T([64, 32], f32),), {})\n"
        "cnt: 1, ((T([128], f32),), {})\n"
        "Operator: aten.empty_like.default\n"
        "cnt: 1, ((T([4], f32),), {})\n"
    )
    cases = build_trace_cases(str(trace), device="cpu", use_cache=False)
    rows = dataset_rows(cases)
    counts = fill_runtimes(rows, cases, "cpu", limit_per_op=1, budget_ms=5.0)
    assert counts == {"timed": 1, "failed": 0, "launch_floor_us": counts["launch_floor_us"]}
    timed = [r for r in rows if r["runtime_ms"] is not None]
    assert len(timed) == 1 and timed[0]["op_name"] == "aten.relu.default"
    assert timed[0]["runtime_ms"] > 0 and timed[0]["relative_runtime_to_kernel_launch"] > 0
    assert isinstance(timed[0]["is_overhead_dominated_op"], bool)
    creation = next(r for r in rows if r["op_name"] == "aten.empty_like.default")
    assert creation["runtime_ms"] is None  # excluded rows are never timed
