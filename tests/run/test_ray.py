"""``--executor ray`` on a local Ray started by the test (CPU only): the same verdicts as
the local executor, streamed into the same results store, crash budget included."""

from __future__ import annotations

from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'opbench[ray]')")

import worker_kernels  # noqa: E402

from opbench.run.session import RunRequest, run  # noqa: E402
from opbench.run.store import ResultStore  # noqa: E402

pytestmark = pytest.mark.slow

KERNELS = {
    **worker_kernels.KERNELS,
    "add__Tensor": """
        import torch

        def add__Tensor_kernel_impl(a, b, *, alpha=1):
            return torch.add(a, b, alpha=alpha)
    """,
}
TRACES = """\
Operator: aten.relu.default
cnt: 4, ((T([16, 8], f32),), {})
cnt: 3, ((T([33], f32),), {})
cnt: 2, ((T([2, 3, 4], f32),), {})
Operator: aten.neg.default
cnt: 4, ((T([8], f32),), {})
cnt: 3, ((T([9], f32),), {})
cnt: 2, ((T([10], f32),), {})
cnt: 1, ((T([11], f32),), {})
Operator: aten.add.Tensor
cnt: 1, ((T([8, 8], f32), T([8, 8], f32)), {})
"""


def _setup(tmp_path: Path) -> tuple[Path, Path]:
    kernels = worker_kernels.write_kernel_dir(tmp_path / "kernels", KERNELS)
    traces = tmp_path / "traces.txt"
    traces.write_text(TRACES)
    return kernels, traces


def _req(kernels: Path, traces: Path, out: Path, executor: str) -> RunRequest:
    return RunRequest(
        suite=f"traces:{traces}",
        backend=str(kernels),
        perf=False,
        out=out,
        executor=executor,
        sandbox="auto",
        max_crashes_per_op=2,
        test_timeout_s=60,
    )


def test_ray_matches_local_and_streams_into_the_store(local_ray, tmp_path):
    kernels, traces = _setup(tmp_path)
    remote = run(_req(kernels, traces, tmp_path / "ray", "ray"))
    local = run(_req(kernels, traces, tmp_path / "local", "local"))
    for key in ("correctness_score", "tests", "ops", "not_tested"):
        assert remote[key] == local[key], key
    assert remote["tests"]["total"] == 8
    store = ResultStore(tmp_path / "ray" / "results.sqlite")
    results = {r.test_id: r for r in store.results()}
    store.close()
    assert len(results) == 8
    by_op = {}
    for r in results.values():
        by_op.setdefault(r.op, []).append((r.status, r.category))
    assert sorted(by_op["relu.default"]) == [("passed", None)] * 3
    assert sorted(by_op["neg.default"]) == [("failed", "crash")] * 2 + [("not_run", "crash")] * 2
    assert by_op["add.Tensor"] == [("failed", "calls_pytorch")]
    assert remote["sandbox"] == local["sandbox"]


def test_ray_resume_runs_only_what_is_missing(local_ray, tmp_path):
    kernels, traces = _setup(tmp_path)
    out = tmp_path / "run"
    first = run(_req(kernels, traces, out, "ray"))
    store = ResultStore(out / "results.sqlite")
    relu_ids = [r.test_id for r in store.results() if r.op == "relu.default"]
    store.remove(set(relu_ids[:2]))  # as if the run had been killed before these finished
    store.close()
    req = _req(kernels, traces, out, "ray")
    req.resume = True
    seen = []
    again = run(req, lambda kind, payload: seen.append(payload) if kind == "result" else None)
    assert sorted(r.test_id for r in seen) == sorted(relu_ids[:2])
    assert again["tests"] == first["tests"] and again["ops"] == first["ops"]
