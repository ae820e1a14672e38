"""``benchmarks/reproduce/compile_baseline.py`` on the CPU: the cases of a real (aten) run are
rebuilt and timed eager against ``torch.compile`` (the ``eager`` compile backend here:
Inductor stays out of CI), the ratios combine with the run's own speedups, a rerun
resumes from the journal, and a backend that cannot compile is recorded per test while
the rest goes on."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location(
        "compile_baseline", ROOT / "benchmarks/reproduce/compile_baseline.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
def test_compile_baseline_on_a_real_run(tmp_path: Path) -> None:
    run = tmp_path / "run"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    cmd = [
        sys.executable, "-m", "opbench.cli", "run", "--suite", "opinfo", "--backend", "aten",
        "--device", "cpu", "--ops", "add.Tensor,relu.default", "--dtypes", "f32",
        "--limit-per-op", "2", "--out", str(run),
    ]  # fmt: skip
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    cb = _script()
    tests = cb.passed_tests(run)
    # 4 tests pass; a loaded machine's judge may drop one's timing as noise (speedup
    # null: 3 of 4 once, beside kernel compiles, 2026-12-02), and only timed ones count
    n = len(tests)
    assert n >= 2 and {t["op"] for t in tests} == {"add.Tensor", "relu.default"}, tests
    per_op = {op: sum(t["op"] == op for t in tests) for op in ("add.Tensor", "relu.default")}

    journal = tmp_path / "cb.jsonl"
    cb.run([run], journal, "cpu", "eager", budget_s=600)
    rows = [json.loads(x) for x in journal.read_text().splitlines()]
    assert len(rows) == n and all("error" not in r for r in rows)
    assert all(r["compile_vs_eager"] > 0 and r["compiled_ms"] > 0 for r in rows)
    cb.run([run], journal, "cpu", "eager", budget_s=600)  # resumes: nothing to redo
    assert len(journal.read_text().splitlines()) == n

    s = cb.summarize(rows)
    want = math.exp(sum(math.log(r["ours_vs_eager"] / r["compile_vs_eager"]) for r in rows) / n)
    assert math.isclose(s["overall"]["ours_vs_compile"], round(want, 3))
    assert s["per_op"]["add.Tensor"]["timed"] == per_op["add.Tensor"]
    md = "\n".join(cb.render(s, {"gpu": "cpu"}, "compile_baseline.py ...", "eager"))
    for op, k in per_op.items():
        assert f"| {op} | {k}/{k} |" in md, md

    broken = tmp_path / "broken.jsonl"
    cb.run([run], broken, "cpu", "no_such_backend", budget_s=600)
    bad = [json.loads(x) for x in broken.read_text().splitlines()]
    assert len(bad) == n and all("error" in r for r in bad)
    assert cb.summarize(bad)["overall"]["timed"] == 0
