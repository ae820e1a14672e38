"""``opbench compare``: regressions, and refusing runs measured differently."""

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from opbench.report.settings import differences, rows


def _opbench(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "opbench.cli", *args], capture_output=True, text=True, env=env
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two real smoke runs on CPU, one with --allow-tf32."""
    root = tmp_path_factory.mktemp("compare")
    out = {}
    for name, extra in (("ieee", []), ("tf32", ["--allow-tf32"])):
        d = root / name
        r = _opbench(
            "run", "--suite", "smoke", "--backend", "aten", "--device", "cpu", "--no-perf",
            "--ops", "relu,add", "--out", str(d), *extra,
        )  # fmt: skip
        assert r.returncode == 0, r.stdout + r.stderr
        out[name] = d
    return out


def _with_speedups(src: Path, dst: Path, speedup: float) -> Path:
    """A copy of run ``src`` whose every op has ``speedup`` (a --no-perf run has none)."""
    s = json.loads((src / "summary.json").read_text())
    for v in s["ops"].values():
        v["speedup"] = speedup
    dst.mkdir(parents=True, exist_ok=True)
    (dst / "summary.json").write_text(json.dumps(s))
    return dst


@pytest.mark.slow
def test_a_run_records_the_pinned_settings_at_start_and_end(runs: dict[str, Path]) -> None:
    s = json.loads((runs["ieee"] / "summary.json").read_text())
    settings = s["env"]["backend_settings"]
    assert settings["start"]["cudnn.conv.fp32_precision"] == "ieee"
    assert settings["end"]["cuda.matmul.fp32_precision"] == "ieee"
    assert s["env"]["cpu"]
    t = json.loads((runs["tf32"] / "summary.json").read_text())
    assert t["env"]["backend_settings"]["start"]["cudnn.conv.fp32_precision"] == "tf32"
    table = rows(s)
    assert table[0][3] is True  # pinned settings first
    assert "Backend settings" in (runs["ieee"] / "report.html").read_text()


@pytest.mark.slow
def test_compare_refuses_runs_that_differ_in_tf32(runs: dict[str, Path]) -> None:
    r = _opbench("compare", str(runs["ieee"]), str(runs["tf32"]))
    assert r.returncode == 3, r.stdout + r.stderr
    assert "cudnn.conv.fp32_precision" in r.stdout and "measured differently" in r.stdout
    forced = _opbench("compare", str(runs["ieee"]), str(runs["tf32"]), "--ignore-settings")
    assert forced.returncode == 0, forced.stdout


@pytest.mark.slow
def test_compare_flags_a_regression_and_ignores_noise(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    base = _with_speedups(runs["ieee"], tmp_path / "a", 1.00)
    noise = _with_speedups(runs["ieee"], tmp_path / "b", 0.99)
    slower = _with_speedups(runs["ieee"], tmp_path / "c", 0.80)
    assert _opbench("compare", str(base), str(noise)).returncode == 0
    r = _opbench("compare", str(base), str(slower))
    assert r.returncode == 1 and "regression" in r.stdout


def test_differences_names_device_gpu_and_settings() -> None:
    a = {
        "device": "cuda:0",
        "env": {"gpu": "H100", "backend_settings": {"start": {"x": 1, "cuda.version": "12"}}},
    }
    assert differences(a, copy.deepcopy(a)) == []
    b = copy.deepcopy(a)
    b["env"]["backend_settings"]["start"]["cuda.version"] = "13"  # versions: recorded only
    assert differences(a, b) == []
    b["env"]["backend_settings"]["start"]["x"] = 2
    b["env"]["gpu"] = "H200"
    assert differences(a, b) == ["GPU: H100 vs H200", "x: 1 vs 2"]
    c = {"device": "cpu", "env": {}}  # a run that predates the record: device only
    assert differences(a, c) == ["device: cuda vs cpu", "GPU: H100 vs None"]


def _store(
    run: Path, speedups: dict[str, tuple[float, float]], failed: frozenset[str] = frozenset()
) -> None:
    """A run directory with per-test results: test -> (speedup, relative error)."""
    from opbench.run.store import ResultStore, TestResult

    run.mkdir(parents=True, exist_ok=True)
    store = ResultStore(run / "results.sqlite")
    for tid, (s, err) in speedups.items():
        op = tid.split("#")[0]
        store.add(
            TestResult(
                test_id=tid, op=op, args="((T([64], f32),), {})",
                status="failed" if tid in failed else "passed",
                category="wrong_result" if tid in failed else None,
                speedup=None if tid in failed else s,
                timing={"speedup_rel_err": err},
            )
        )  # fmt: skip
    store.close()
    ops: dict[str, dict] = {}
    for tid, (s, _) in speedups.items():
        o = ops.setdefault(f"aten.{tid.split('#')[0]}", {"correct": True, "sp": []})
        o["correct"] = o["correct"] and tid not in failed
        o["sp"].append(s)
    summary = {
        "run_dir": str(run), "device": "cpu", "env": {},
        "ops": {
            op: {"correct": o["correct"],
                 "speedup": (o["sp"][0] * o["sp"][1]) ** 0.5 if o["correct"] else None}
            for op, o in ops.items()
        },
    }  # fmt: skip
    (run / "summary.json").write_text(json.dumps(summary))


@pytest.mark.slow
def test_per_test_significance_decides_which_slowdowns_regress(tmp_path: Path) -> None:
    from opbench.report.compare import compare_tests, op_regressions

    a, b = tmp_path / "a", tmp_path / "b"
    base = {
        "relu.default#1": (1.00, 0.005), "relu.default#2": (1.00, 0.005),
        "add.Tensor#1": (1.00, 0.05), "add.Tensor#2": (1.00, 0.05),
        "mul.Tensor#1": (1.00, 0.005), "mul.Tensor#2": (1.00, 0.005),
    }  # fmt: skip
    _store(a, base)
    # relu really slower; add as much slower but inside its noise; mul one test fails
    _store(
        b,
        {**base, "relu.default#1": (0.80, 0.005), "relu.default#2": (0.85, 0.005),
         "add.Tensor#1": (0.85, 0.05), "add.Tensor#2": (0.88, 0.05)},
        failed=frozenset({"mul.Tensor#2"}),
    )  # fmt: skip
    changes = compare_tests(a, b)
    assert changes is not None
    sig = {c.test_id for c in changes if c.significant}
    assert sig == {"relu.default#1", "relu.default#2", "mul.Tensor#2"}
    sa, sb = (
        json.loads((a / "summary.json").read_text()),
        json.loads((b / "summary.json").read_text()),
    )
    regressions = op_regressions(sa, sb, changes, threshold=0.05)
    assert any(r.startswith("aten.relu.default: speedup") for r in regressions)
    assert any(r.startswith("aten.mul.Tensor: correct -> not correct") for r in regressions)
    assert not any("add.Tensor" in r for r in regressions)  # a drop inside the noise
    # without per-test results, the threshold alone flags add too
    assert any("add.Tensor" in r for r in op_regressions(sa, sb, None, threshold=0.05))
    page = tmp_path / "compare.html"
    r = _opbench("compare", str(a), str(b), "--html", str(page))
    assert r.returncode == 1 and "relu.default" in r.stdout
    assert "within noise" in page.read_text() and "outside both runs" in page.read_text()
