"""Serve only where it wins (backends/serve_policy.py): a policy built from a run's stored
results serves an operator per shape class where its speedup beat eager, never an operator
that failed a test, and answers live calls by their dtype and size."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from opbench.backends.serve_policy import (
    ServePolicy,
    policy_from_run,
    shape_class,
    shape_class_of_args,
    shape_class_of_spec,
)
from opbench.run.store import ResultStore, TestResult

SMALL = "((T([8, 8], f32),), {})"  # 64 elements: class f32:4^3
LARGE = "((T([1024, 1024], f32),), {})"  # 1M elements: class f32:4^10


def _run(tmp: Path, rows: list[tuple[str, str, str, float | None]]) -> Path:
    run = tmp / "run"
    run.mkdir()
    store = ResultStore(run / "results.sqlite")
    for i, (op, args, status, host) in enumerate(rows):
        store.add(
            TestResult(
                test_id=f"t{i}",
                op=op,
                args=args,
                status=status,
                speedup=1.0 if host is not None else None,
                speedup_host=host,
                device="cuda:0",
            )
        )
    store.close()
    return run


def test_classes_of_specs_and_live_calls_agree() -> None:
    assert shape_class_of_spec(SMALL) == shape_class("f32", 64) == "f32:4^3"
    assert shape_class_of_spec(LARGE) == "f32:4^10"
    x = torch.zeros(1024, 1024)
    assert shape_class_of_args((torch.zeros(8, 8), x), {}) == "f32:4^10"
    assert shape_class_of_args(([torch.zeros(8, 8, dtype=torch.float16)],), {}) == "f16:4^3"
    assert shape_class_of_args((1.0,), {}) is None


def test_a_policy_serves_the_classes_that_won(tmp_path: Path) -> None:
    run = _run(
        tmp_path,
        [
            ("relu.default", SMALL, "passed", 0.5),  # loses on small calls (host-bound)
            ("relu.default", SMALL, "passed", 0.6),
            ("relu.default", LARGE, "passed", 1.4),  # wins on large ones
            ("add.Tensor", LARGE, "passed", 3.0),
            ("add.Tensor", SMALL, "failed", None),  # one failure: never served
            ("mul.Tensor", LARGE, "passed", 0.9),
            ("neg.default", LARGE, "passed", None),  # correct, never timed: not served
        ],
    )
    p = policy_from_run(run)
    assert p.measure == "host" and p.device == "cuda"
    assert p.served_ops() == {"relu.default"}
    small, large = torch.zeros(8, 8), torch.zeros(1024, 1024)
    assert not p.serves("relu.default", (small,), {})
    assert p.serves("relu.default", (large,), {})
    # a class the run never timed takes the op's geomean over all its tests (0.75: no)
    assert not p.serves("relu.default", (torch.zeros(64, 64),), {})
    assert not p.serves("add.Tensor", (large, large), {})
    assert not p.serves("mul.Tensor", (large, large), {})
    assert not p.serves("neg.default", (large,), {})
    # the file round-trips and is readable
    again = ServePolicy.from_json(p.to_json())
    assert again == p
    assert '"f32:4^10"' in p.to_json()


def test_device_measure_and_threshold(tmp_path: Path) -> None:
    run = _run(tmp_path, [("relu.default", LARGE, "passed", 1.4)])
    assert policy_from_run(run, min_speedup=1.5).served_ops() == set()
    with pytest.raises(ValueError, match="measure"):
        policy_from_run(run, measure="wall")
    with pytest.raises(FileNotFoundError, match="not a run directory"):
        policy_from_run(tmp_path / "nowhere")
