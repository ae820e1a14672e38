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


RELU = """
import numpy as np
import torch

CALLS = []


def relu__default_kernel_impl(x):
    CALLS.append(x.numel())
    return torch.from_numpy(np.maximum(x.detach().numpy(), 0).astype(x.detach().numpy().dtype))
"""


def _kernels(tmp: Path) -> Path:
    d = tmp / "kernels" / "relu__default"
    d.mkdir(parents=True)
    (d / "relu__default_implementation.py").write_text(RELU)
    return tmp / "kernels"


def test_enable_with_a_policy_serves_only_the_winning_classes(tmp_path: Path) -> None:
    import opbench
    from opbench.backends import registry

    run = _run(
        tmp_path,
        [("relu.default", SMALL, "passed", 0.5), ("relu.default", LARGE, "passed", 1.4)],
    )
    kernels = _kernels(tmp_path)
    registry.reset_counts()
    with opbench.backend(kernels, device="cpu", policy=run):
        small = torch.relu(torch.randn(8, 8))
        large = torch.relu(torch.randn(1024, 1024))
        counts = registry.call_counts()["relu.default"]
    assert counts["served"] == 1 and counts["declined"] == 1, counts
    assert (small >= 0).all() and (large >= 0).all()
    # without a policy every call is served
    registry.reset_counts()
    with opbench.backend(kernels, device="cpu"):
        torch.relu(torch.randn(8, 8))
        assert registry.call_counts()["relu.default"]["served"] == 1


def test_a_package_built_from_a_run_carries_its_policy(tmp_path: Path) -> None:
    import importlib
    import sys

    from opbench.backends.packaging import PackageError, build_package

    run = _run(
        tmp_path,
        [("relu.default", SMALL, "passed", 0.5), ("relu.default", LARGE, "passed", 1.4)],
    )
    out = build_package(_kernels(tmp_path), "relu_pkg_policy", tmp_path / "pkg", from_run=run)
    policy_file = out / "src" / "relu_pkg_policy" / "serve_policy.json"
    assert policy_file.exists() and '"f32:4^10"' in policy_file.read_text()
    sys.path.insert(0, str(out / "src"))
    try:
        pkg = importlib.import_module("relu_pkg_policy")
        assert pkg.policy().served_ops() == {"relu.default"}
        with pkg.backend("cpu"):  # the package's own copy of the registry counts
            torch.relu(torch.randn(8, 8))
            torch.relu(torch.randn(1024, 1024))
            counts = pkg.call_counts()["relu.default"]
        assert (counts["served"], counts["declined"]) == (1, 1), counts
    finally:
        sys.path.remove(str(out / "src"))
        for m in [m for m in sys.modules if m.startswith("relu_pkg_policy")]:
            del sys.modules[m]
    with pytest.raises(PackageError, match="--from-run"):
        build_package(_kernels(tmp_path / "x"), "p2", tmp_path / "p2", from_run=tmp_path / "none")
