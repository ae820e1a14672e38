"""``benchmarks/probes/tma_variants.py --self-check``: every probe kernel computes the
product (against float64, under Triton's interpreter) on ragged and aligned sizes, each
operand row- or column-major, with a row-vector bias: a variant that computes something
else must never be timed as a candidate."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")

REPO = Path(__file__).resolve().parents[1]


def test_every_probe_kernel_matches_float64_under_the_interpreter() -> None:
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "probes" / "tma_variants.py"), "--self-check"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    lines = [x for x in done.stdout.splitlines() if "max err" in x]
    # each variant on 2 sizes x 4 layouts, each within tolerance
    assert lines and len(lines) % 8 == 0, done.stdout[-2000:]
    assert all(x.endswith(" ok") for x in lines), done.stdout[-2000:]
