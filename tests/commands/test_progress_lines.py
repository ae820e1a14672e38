"""``opbench run`` writing to a log file (not a terminal): rich draws its progress bar only
at the end there, so each finished test is a plain line, and a run cut off by a time
limit (a lent GPU's call) still shows how far it got."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
def test_each_finished_test_is_a_line_when_output_is_not_a_terminal(tmp_path: Path) -> None:
    cmd = [
        sys.executable, "-m", "opbench.cli", "run", "--suite", "smoke", "--backend", "aten",
        "--ops", "relu,add", "--device", "cpu", "--no-perf", "--out", str(tmp_path / "run"),
    ]  # fmt: skip
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = re.findall(r"^\[(\d+)/(\d+)\] (\S+): (\w+)", r.stdout + r.stderr, re.M)
    assert lines, r.stdout
    total = int(lines[0][1])
    assert [int(n) for n, _, _, _ in lines] == list(range(1, total + 1))
    assert {op.split(":")[0] for _, _, op, _ in lines} >= {"relu.default", "add.Tensor"}
    assert all(status == "passed" for *_, status in lines)
