"""Our hand-written Triton fusions for Level-2 problems
(``benchmarks/program_candidates``), judged on the CPU under Triton's interpreter at
``--size small`` through the real CLI: each is correct, and a copy with the residual
dropped is not."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CANDIDATES = REPO / "benchmarks" / "program_candidates"
FUSED = sorted(p.stem for p in (CANDIDATES / "level2").glob("*.py"))

pytestmark = pytest.mark.slow


def _run(candidates: Path, out: Path, problems: list[str]) -> dict:
    cmd = [
        sys.executable, "-m", "opbench.cli", "run", "--suite", "programs", "--levels", "2",
        "--candidates", str(candidates), "--device", "cpu", "--no-perf",
        "--ops", ",".join(f"level2/{p}" for p in problems), "--out", str(out), "--quiet",
    ]  # fmt: skip
    subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    return json.loads((out / "summary.json").read_text())


def test_every_fusion_is_correct_under_the_interpreter(tmp_path: Path) -> None:
    assert len(FUSED) >= 3, FUSED
    summary = _run(CANDIDATES, tmp_path / "run", FUSED)
    problems = summary["problems"]
    assert sorted(problems) == [f"level2/{p}" for p in FUSED]
    for name, rec in problems.items():
        assert rec["correct"], (name, rec)


def test_a_fusion_that_drops_the_residual_is_wrong(tmp_path: Path) -> None:
    bad = tmp_path / "cands" / "level2"
    bad.mkdir(parents=True)
    src = (CANDIDATES / "level2" / "04_add_layernorm.py").read_text()
    assert "h = x + r" in src
    (bad / "04_add_layernorm.py").write_text(src.replace("h = x + r", "h = x + 0.0 * r"))
    shutil.copy(CANDIDATES / "level2" / "19_geglu.py", bad / "19_geglu.py")
    problems = _run(tmp_path / "cands", tmp_path / "run", ["04_add_layernorm", "19_geglu"])[
        "problems"
    ]
    assert not problems["level2/04_add_layernorm"]["correct"]
    assert problems["level2/04_add_layernorm"]["category"] == "wrong_result"
    assert problems["level2/19_geglu"]["correct"]
