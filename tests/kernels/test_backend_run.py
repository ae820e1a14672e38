"""``--backend triton --device cpu`` end to end: the judge's own run over the OpInfo
quick profile for one or two ops of every family, in the worker, under the guard and
the static scan (no ``--allow-pytorch``, no ``--allow``). Every test must pass and no
kernel may call PyTorch compute or trip a scan rule."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")
pytest.importorskip("expecttest")

REPO = Path(__file__).resolve().parents[2]
#: one or two ops per family, with their in-place and out= variants
OPS = "add,add_,gelu,where,threshold_backward,div,cat,copy_,clone,sum,amax,_softmax,native_layer_norm,embedding"


@pytest.mark.slow
def test_triton_backend_passes_the_quick_opinfo_profile_on_cpu(tmp_path: Path) -> None:
    out = tmp_path / "run"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")])
    env.pop("TRITON_INTERPRET", None)  # the worker must set it up itself
    cmd = [
        sys.executable, "-m", "opbench.cli", "run", "--suite", "opinfo", "--backend", "triton",
        "--device", "cpu", "--ops", OPS, "--dtypes", "f32,f16", "--no-perf", "--out", str(out),
    ]  # fmt: skip
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    con = sqlite3.connect(out / "results.sqlite")
    bad = con.execute(
        "select op, args, category, message from results where status != 'passed'"
    ).fetchall()
    con.close()
    assert not bad, "\n".join(map(str, bad[:20]))
    assert summary["correctness_score"] == 1.0
    assert summary["tests"]["total"] >= 100


def test_static_scan_finds_nothing_in_the_reference_backend() -> None:
    """Kernel files and the shared modules they import: no tampering, no warnings."""
    from opbench.judge.static_scan import scan_source

    root = REPO / "src" / "opbench" / "kernels"
    files = sorted(root.glob("*/*_implementation*.py")) + sorted((root / "_lib").glob("*.py"))
    assert len(files) > 60
    findings = [f for p in files for f in scan_source(p.read_text(), str(p.relative_to(root)))]
    assert not findings, "\n".join(map(str, findings))


@pytest.mark.slow
@pytest.mark.skipif(
    os.environ.get("OPBENCH_KERNEL_DEVICE", "cpu") != "cpu",
    reason="the CPU interpreter's route, which CI runs (Triton 3.9); the GPU run is for "
    "compiled kernels, and the GPU machine's Triton 3.6 interpreter cannot run a loop over "
    "a runtime count with NumPy >= 2.4 (its tensors' __index__ is int() of a 1-element "
    "array, which NumPy 2.4 refuses; Triton 3.9 squeezes it first): docs/triton-backend.md",
)
def test_four_models_train_on_the_triton_backend_on_cpu(tmp_path: Path) -> None:
    """BERT, GPT-2, a ResNet and a Transformer encoder: forward, loss, backward and an SGD
    step on the backend agree with eager within eager's own error against float64
    (``opbench check-model``; TRITON_INTERPRET is set up by the backend loader)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")])
    env.pop("TRITON_INTERPRET", None)
    report = tmp_path / "models.json"
    cmd = [
        sys.executable, "-m", "opbench.cli", "check-model", "--backend", "triton",
        "--device", "cpu", "--no-ops", "--json", str(report),
    ]  # fmt: skip
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    results = json.loads(report.read_text())
    rows = results if isinstance(results, list) else results.get("models", results)
    assert len(rows) == 4
    for r in rows:
        assert r["ok"], r
        assert len(r["served_ops"]) >= 10, r["served_ops"]


def test_every_kernel_folder_loads() -> None:
    """Each op folder imports and names its kernel (the OpInfo run reaches only some of
    them: a folder pointing at a moved function would otherwise go unnoticed)."""
    from opbench.backends.loader import load_backend

    backend = load_backend("triton", "cpu")
    assert backend.load_errors == {}, backend.load_errors
    root = REPO / "src" / "opbench" / "kernels"
    folders = [p for p in root.iterdir() if any(p.glob("*_implementation*.py"))]
    assert len(folders) > 100
    assert len(backend.kernels) == len(folders)
