"""``check-model --cuda-graphs`` on a CPU: the flag is refused with a clear message, and a
side whose capture fails becomes that side's recorded error (naming the kernel's
overload) while the check and the other side's graph time stand.

No CUDA here, so the capture itself is faked: the fake runs the real training step under
the real op recorder and fails the way ``torch.cuda.graph`` does (a host-syncing kernel
raises, then the graph's exit raises again with that error as its context); everything
after that, from the error handling to the result fields, is the code under test."""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backends"))
from kernel_dirs import write_dir  # noqa: E402

from opbench.models import check as cm  # noqa: E402
from opbench.models import graph_timing as gt  # noqa: E402

#: The message CUDA gives a host sync (``.item()``, ``.cpu()``) inside a capture.
SYNC_ERROR = "CUDA error: operation not permitted when stream is capturing"

#: relu that syncs the host when a stream is capturing, as a kernel calling ``.item()``.
SYNCING_RELU = {
    "relu/relu_implementation.py": f"""
        import torch

        def relu_kernel_impl(x):
            if torch.cuda.is_current_stream_capturing():
                raise RuntimeError({SYNC_ERROR!r})
            return torch.clamp(x, min=0)
    """,
}


def test_cuda_graphs_on_cpu_is_a_usage_error() -> None:
    from opbench.cli import app

    result = CliRunner().invoke(
        app, ["check-model", "--cuda-graphs", "--device", "cpu", "--time-steps", "1"]
    )
    assert result.exit_code == 2, result.output
    assert "CUDA graphs need a CUDA device" in result.output
    with pytest.raises(ValueError, match="CUDA graphs need a CUDA device"):
        cm.check_model("encoder", "aten", "cpu", time_steps=1, cuda_graphs=True)


class _ReplayEagerly:
    """A "graph" on the CPU: replaying it runs the captured step."""

    def __init__(self, step) -> None:
        self.step = step

    def replay(self) -> None:
        self.step()


def _fake_capture(monkeypatch: pytest.MonkeyPatch):
    # a CPU build of torch raises from this; here it says whether the fake is capturing
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)

    def capture(step, device, warmup, ops):
        for _ in range(warmup):
            step()
        monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
        try:
            with ops:
                try:
                    step()
                except Exception:  # capture_end, as torch.cuda.graph's exit raises it
                    raise RuntimeError("CUDA error: operation failed due to a previous error")  # noqa: B904
        finally:
            monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
        return _ReplayEagerly(step)

    monkeypatch.setattr(gt, "_capture", capture)


def test_failed_capture_is_that_sides_error(tmp_path: Path, monkeypatch) -> None:
    """The backend's relu syncs under capture: its side has no graph time and an error
    naming ``relu.default`` and the first error (not the graph's "previous error"), in
    the JSON and printed whole under the table; the eager side is timed; the comparison
    and the plain step times are untouched, and the command succeeds."""
    from opbench.cli import app

    _fake_capture(monkeypatch)
    monkeypatch.setattr(cm, "cuda_graphs_usable", lambda device, steps: None)
    kernels = write_dir(tmp_path / "kernels", SYNCING_RELU)
    report = tmp_path / "r.json"
    args = ["check-model", "--cuda-graphs", "--device", "cpu", "--time-steps", "1", "--no-ops"]
    args += ["--models", "encoder", "--backend", str(kernels), "--json", str(report)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    [r] = json.loads(report.read_text())
    assert r["ok"] and r["error"] is None, r["error"]
    assert r["eager_step_ms"] and r["backend_step_ms"]
    assert r["eager_graph_ms"] > 0 and r["eager_graph_error"] is None
    assert r["backend_graph_ms"] is None and r["graph_speedup"] is None
    error = f"capture failed in relu.default: RuntimeError: {SYNC_ERROR}"
    assert r["backend_graph_error"] == error
    assert "backend graph ms" in result.output and "failed" in result.output
    # the timed steps' share launched from C++, under the table (none on a CPU)
    assert "encoder: 0% of a timed step's calls launched from C++ (0% in the checked step)" in (
        result.output
    )
    assert f"no graph encoder (backend): {error}" in result.output


def test_graph_speedup_from_both_sides(monkeypatch) -> None:
    """Both sides captured: replays are timed and the speedup is eager over backend."""
    _fake_capture(monkeypatch)
    x = torch.ones(64, 64)
    t = gt.graph_step_ms(lambda: torch.mm(x, x), "cpu", steps=3)
    assert t.error is None and t.ms is not None and t.ms > 0
    r = cm.ModelCheck("m", "b", "cuda", False, True, True, eager_graph_ms=3.0)
    r.backend_graph_ms = 1.5
    assert r.graph_speedup == 2.0 and r.to_dict()["graph_speedup"] == 2.0


def test_the_captured_step_runs_its_forward_under_autocast(monkeypatch) -> None:
    """``model_graph_times(..., autocast)``: both sides' captured steps (and their
    warm-up) run the forward in autocast's dtype; the model's head sees bfloat16."""
    from opbench.models.zoo import get_model

    _fake_capture(monkeypatch)
    spec = get_model("resnet")
    base, batch = spec.build(), spec.inputs(torch.Generator().manual_seed(0))
    seen: list[torch.dtype] = []
    base.head.register_forward_hook(lambda m, i, o: seen.append(o.dtype))
    eager, backend = gt.model_graph_times(
        spec, base, batch, "cpu", 1, contextlib.nullcontext, "bf16"
    )
    assert eager.error is None and backend.error is None, (eager, backend)
    assert seen and set(seen) == {torch.bfloat16}
