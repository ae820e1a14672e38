"""check-model on CPU: the aten backend is bit-identical on all four architectures, and
a directory backend with a few numpy kernels stays within tolerance, with a coverage
table that matches what the kernels themselves counted."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backends"))
from kernel_dirs import MARKED_KERNELS, NUMPY_KERNELS, write_dir  # noqa: E402

from opbench.backends import registry  # noqa: E402
from opbench.backends.directory import DirectoryBackend  # noqa: E402
from opbench.models import MODEL_NAMES  # noqa: E402
from opbench.models.check import check_model  # noqa: E402

pytest.importorskip("transformers")


@pytest.mark.slow
@pytest.mark.parametrize("name", MODEL_NAMES)
def test_aten_backend_is_identical(name: str) -> None:
    r = check_model(name, "aten", "cpu")
    assert r.error is None
    assert r.ok and r.identical
    assert r.ops_called, "the op counter saw nothing"
    # every overload the model called was registered and served through the registry
    assert set(r.served_ops) == set(r.ops_called)
    assert registry.active_backends() == []


@pytest.mark.slow
@pytest.mark.parametrize("name", MODEL_NAMES)
def test_directory_backend_within_tolerance_and_coverage(name: str, tmp_path: Path) -> None:
    be = DirectoryBackend(write_dir(tmp_path, NUMPY_KERNELS), "cpu")
    calls = be.kernels["add.Tensor"].fn.__globals__["CALLS"]
    r = check_model(name, be, "cpu")
    assert r.error is None, r.error
    assert r.ok
    cov = {c.op: c for c in r.coverage}
    # only overloads this directory serves are served
    assert set(r.served_ops) <= be.served_ops()
    assert "add.Tensor" in cov and "add.Tensor" in r.ops_called
    # served + declined calls of add.Tensor and its derived add_/add.out variants = the
    # times the add kernel itself ran
    family = ("add.Tensor", "add_.Tensor", "add.out")
    assert sum(cov[o].served + cov[o].fallback for o in family if o in cov) == len(calls)
    for op, c in cov.items():
        if op not in be.served_ops():
            assert c.served == 0 and c.fallback == 0


def test_wrong_kernels_are_caught(tmp_path: Path) -> None:
    r = check_model("encoder", DirectoryBackend(write_dir(tmp_path, MARKED_KERNELS), "cpu"), "cpu")
    assert not r.ok and "mismatch" in (r.error or "")


@pytest.mark.slow  # over 1.5 s on 2 cores (2026-11-28, --durations)
def test_compile_with_aot_eager_reaches_the_backend(tmp_path: Path) -> None:
    pytest.importorskip("torch._dynamo")
    be = DirectoryBackend(write_dir(tmp_path, NUMPY_KERNELS), "cpu")
    r = check_model("encoder", be, "cpu", compile=True, compile_backend="aot_eager")
    assert r.error is None, r.error
    assert r.ok
    assert any(c.served for c in r.coverage)


@pytest.mark.slow
def test_training_steps_timed_eager_and_on_the_backend(tmp_path: Path) -> None:
    """``time_steps``: both step times measured after warm-up; the numpy add kernel runs
    in the timed backend steps (it counts its calls), and the share of calls served is
    what the coverage table says."""
    be = DirectoryBackend(write_dir(tmp_path, NUMPY_KERNELS), "cpu")
    calls = be.kernels["add.Tensor"].fn.__globals__["CALLS"]
    check_model("encoder", be, "cpu")
    untimed = len(calls)
    r = check_model("encoder", be, "cpu", time_steps=2)
    assert r.ok and r.error is None, r.error
    assert len(calls) > 2 * untimed  # the timed steps ran on the backend's kernel
    assert r.eager_step_ms and r.eager_step_ms > 0
    assert r.backend_step_ms and r.backend_step_ms > 0
    assert r.step_speedup == pytest.approx(r.eager_step_ms / r.backend_step_ms)
    served = sum(min(c.served, c.calls) for c in r.coverage)  # the model's own calls
    assert 0 < r.served_call_share == served / sum(c.calls for c in r.coverage) < 1
    d = r.to_dict()
    assert d["served_call_share"] == r.served_call_share and d["backend_step_ms"] > 0


def test_steps_timed_on_the_aten_backend() -> None:
    """The aten backend registers detach and the alias ops: the timed model is copied
    before it is enabled (a copy made under it failed, and the backend had no time)."""
    r = check_model("encoder", "aten", "cpu", time_steps=1)
    assert r.error is None, r.error
    assert r.eager_step_ms and r.backend_step_ms


@pytest.mark.slow
def test_only_ops_registers_just_those(tmp_path: Path) -> None:
    """``only_ops`` narrows the backend to the named overloads: each marked (wrong) kernel
    alone breaks the model, and naming neither leaves it passing with nothing served."""
    be = DirectoryBackend(write_dir(tmp_path, MARKED_KERNELS), "cpu")
    for op in ("add.Tensor", "relu.default"):
        broken = check_model("encoder", be, "cpu", only_ops=[op])
        assert not broken.ok and set(broken.served_ops) == {op}
    fine = check_model("encoder", be, "cpu", only_ops=["mul.Tensor"])
    assert fine.ok and fine.served_ops == []


def test_float32_precision_pinned_for_the_check_and_restored(monkeypatch) -> None:
    """Eager and the backend run float32 matmuls and convolutions in IEEE float32 (what
    opbench run pins: under TF32, cuDNN's choice would set eager's error and so the
    bound), TF32 only when asked for, and the caller's settings come back afterwards."""
    import torch

    from opbench.models import check as cm

    cpu, gpu = torch.backends.mkldnn.matmul, torch.backends.cuda.matmul
    before = (cpu.fp32_precision, gpu.fp32_precision)
    seen = []
    monkeypatch.setattr(
        cm, "_check_model", lambda *a: seen.append((cpu.fp32_precision, gpu.fp32_precision))
    )
    cpu.fp32_precision, gpu.fp32_precision = "bf16", "tf32"
    try:
        cm.check_model("encoder", "aten", "cpu")
        cm.check_model("encoder", "aten", "cpu", allow_tf32=True)
        assert seen == [("ieee", "ieee"), ("ieee", "tf32")]  # oneDNN: never TF32
        assert (cpu.fp32_precision, gpu.fp32_precision) == ("bf16", "tf32")
    finally:
        cpu.fp32_precision, gpu.fp32_precision = before


def test_the_reasons_a_models_calls_stay_python_each_once():
    """What check-model's op table says of an op whose served calls were not all launched
    from C++: launch replay's reasons for the signatures it refused, each once, in the
    order met, at most three; then how many are still being recorded; nothing of a
    signature that replays."""
    from opbench.models.check import python_reasons

    notes = [
        {"ready": False, "why": "the function called aten.add.Tensor"},
        {"ready": True, "why": ""},
        {"ready": False, "why": "a launch reads address 0x10, outside the call's tensors"},
        {"ready": False, "why": "the function called aten.add.Tensor"},
        {"ready": False, "why": ""},  # recorded once, not refused
    ]
    assert python_reasons(notes) == (
        "the function called aten.add.Tensor; "
        "a launch reads address 0x10, outside the call's tensors; "
        "1 signature met too few times to replay yet (from a signature's third or fourth call)"
    )
    # a model's checked step meets most signatures once: all still recording, none refused
    recording = [{"ready": False, "why": ""}, {"ready": False, "why": ""}, {"ready": True}]
    assert python_reasons(recording) == (
        "2 signatures met too few times to replay yet (from a signature's third or fourth call)"
    )
    assert python_reasons([{"ready": False, "why": "", "given_up": True, "recordings": 4}]) == (
        "4 recordings of a signature that never agreed"
    )
    assert python_reasons([]) == ""
    many = [{"ready": False, "why": f"reason {i}"} for i in range(5)]
    assert python_reasons(many) == "reason 0; reason 1; reason 2 (+2 more)"


def test_step_times_take_turns_eager_then_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    """The timed steps alternate in blocks, eager's then the backend's, the backend
    registered for its blocks only: a host that slows down over a run slows both sides
    alike. Each side times ``steps`` steps in all, each block after its own untimed
    warm-up, and the backend's counts are read over its last block's timed steps."""
    import contextlib
    from typing import Any

    import torch

    from opbench.models import step_timing as ck
    from opbench.models.zoo import get_model

    spec = get_model("encoder")
    base, batch = spec.build(), spec.inputs(torch.Generator().manual_seed(0))
    order: list[str] = []
    registered: list[bool] = []
    real_times = ck.call_times_ms

    def times(call: Any, device: str, steps: int, warmup: int) -> list[float]:
        order.append(f"{'backend' if registered else 'eager'}:{steps}:{warmup}")
        return real_times(call, device, steps, warmup)

    @contextlib.contextmanager
    def enable() -> Any:
        registered.append(True)
        yield
        registered.pop()

    def blocks(*sizes: int) -> list[str]:
        w = ck.TURN_WARMUP
        out = []
        for n in sizes:
            out += [f"eager:0:{w}", f"eager:{n}:0"]
            # the backend's counts: zeroed after its warm-up, read after its timed steps
            out += [f"backend:0:{w}", "reset", f"backend:{n}:0", "counts"]
        return out

    monkeypatch.setattr(ck, "call_times_ms", times)
    monkeypatch.setattr(ck.registry, "reset_counts", lambda: order.append("reset"))
    monkeypatch.setattr(ck.registry, "call_counts", lambda: order.append("counts") or {})
    t = ck.alternating_step_ms(spec, base, batch, "cpu", 7, enable)
    assert order == blocks(3, 2, 2)
    assert not registered and t.eager_ms > 0 and t.backend_ms > 0 and t.timed_steps == 2
    order.clear()  # fewer steps than turns: one step a turn
    ck.alternating_step_ms(spec, base, batch, "cpu", 2, enable)
    assert order == blocks(1, 1)


@pytest.mark.slow
def test_the_timed_steps_native_share_is_read_over_timed_steps(tmp_path: Path) -> None:
    """``timed_native_share`` comes with ``time_steps`` only, in the record and its
    dict (on the CPU no call is launched from C++: 0)."""
    be = DirectoryBackend(write_dir(tmp_path, NUMPY_KERNELS), "cpu")
    assert check_model("encoder", be, "cpu").timed_native_share is None
    r = check_model("encoder", be, "cpu", time_steps=3)
    assert r.error is None, r.error
    assert r.timed_native_share == 0.0
    assert r.to_dict()["timed_native_share"] == 0.0


def test_autocast_runs_the_forward_in_16_bits_on_both_sides() -> None:
    """``autocast="bf16"``: the forward runs under torch.autocast (the ResNet's linear
    head returns bfloat16), eager and the backend alike (the aten backend stays
    bit-identical), and the record says so; without it the output is float32."""
    r = check_model("resnet", "aten", "cpu", autocast="bf16")
    assert r.error is None, r.error
    assert r.ok and r.identical
    assert r.autocast == "bf16" and r.output_dtype == "torch.bfloat16"
    assert r.to_dict()["autocast"] == "bf16"
    assert check_model("resnet", "aten", "cpu").output_dtype == "torch.float32"


#: A correct matmul that rounds otherwise than eager's: 16-bit results truncated toward
#: zero from float32 (up to one unit in the last place off, eager's half a unit).
WIDE_ADDMM = {
    "addmm/addmm_implementation.py": """
        import torch

        CALLS = []

        def addmm_kernel_impl(bias, a, b, *, beta=1, alpha=1):
            CALLS.append(a.dtype)
            out = beta * bias.float() + alpha * (a.float() @ b.float())
            if a.dtype == torch.bfloat16:  # truncate: keep the top 16 bits of each float32
                out = (out.view(torch.int32) & -65536).view(torch.float32)
            return out.to(torch.result_type(a, b))
    """,
}


def test_autocast_admits_a_correct_kernel_that_rounds_otherwise(tmp_path: Path) -> None:
    """A bfloat16 matmul that truncates where eager rounds to nearest differs from eager
    (not identical) and is within 16-bit rounding: the check passes it, and the matmuls
    it served ran in bfloat16 (autocast's)."""
    import torch

    be = DirectoryBackend(write_dir(tmp_path, WIDE_ADDMM), "cpu")
    calls = be.kernels["addmm"].fn.__globals__["CALLS"]
    r = check_model("encoder", be, "cpu", autocast="bf16")
    assert r.error is None, r.error
    assert r.ok and not r.identical
    assert "addmm.default" in r.served_ops and set(calls) == {torch.bfloat16}


def test_autocast_still_catches_wrong_kernels(tmp_path: Path) -> None:
    """Under autocast the bound is eager's 16-bit error against float64 (x10) plus rtol:
    a kernel that is wrong, not merely rounded, still fails."""
    be = DirectoryBackend(write_dir(tmp_path, MARKED_KERNELS), "cpu")
    r = check_model("encoder", be, "cpu", autocast="bf16")
    assert not r.ok and "mismatch" in (r.error or "")


def test_autocast_names_are_checked_before_any_model_runs(tmp_path: Path) -> None:
    """A bad ``--autocast`` is one clear line and exit 2; a good one reaches the record
    and the table's title."""
    import json

    from typer.testing import CliRunner

    from opbench.cli import app

    with pytest.raises(ValueError, match="use bf16 or f16"):
        check_model("resnet", "aten", "cpu", autocast="fp8")
    bad = CliRunner().invoke(app, ["check-model", "--models", "resnet", "--autocast", "fp8"])
    assert bad.exit_code == 2 and "--autocast: autocast 'fp8': use bf16 or f16" in bad.output
    out = tmp_path / "r.json"
    args = ["check-model", "--models", "resnet", "--autocast", "bf16", "--json", str(out)]
    good = CliRunner().invoke(app, args)
    assert good.exit_code == 0, good.output
    assert "forward under autocast bf16" in good.output
    [r] = json.loads(out.read_text())
    assert r["ok"] and r["autocast"] == "bf16" and r["output_dtype"] == "torch.bfloat16"


def test_the_timed_step_runs_its_forward_under_autocast() -> None:
    """``training_step(..., autocast)``, the step the timers and the CUDA graph run: the
    model's linear layers see autocast's dtype inside it, float32 outside it."""
    import torch

    from opbench.models.graph_timing import training_step
    from opbench.models.zoo import get_model

    spec = get_model("resnet")
    model, batch = spec.build(), spec.inputs(torch.Generator().manual_seed(0))
    seen: list[torch.dtype] = []
    model.head.register_forward_hook(lambda m, i, o: seen.append(o.dtype))
    training_step(spec, model, batch, "bf16")()
    training_step(spec, model, batch)()
    assert seen == [torch.bfloat16, torch.float32]
    assert all(p.grad is not None and p.grad.dtype == torch.float32 for p in model.parameters())


def test_call_shares_count_the_models_own_calls_only() -> None:
    """The aten backend serves every call, and the dispatches its kernels make inside
    theirs too (served above the model's calls for some ops): the share is 100%, not the
    212% that counting those gave."""
    r = check_model("resnet", "aten", "cpu")
    assert any(c.served > c.calls for c in r.coverage), "no nested dispatch to count"
    assert r.served_call_share == 1.0
    assert r.native_call_share == 0.0  # nothing launched from C++ on a CPU
