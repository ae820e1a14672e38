"""A problem whose outputs a worker could not send (every trial's outputs, and two timed
calls' when timed, travel in one message of at most 8 GiB) is not runnable, said before
anything is allocated, instead of a crash after minutes of work."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BIG_OUTPUT = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return a @ b  # 64 MiB of inputs, a 16 GiB output


def get_inputs():
    return [torch.rand(1 << 16, 64), torch.rand(64, 1 << 16)]


def get_init_inputs():
    return []
"""


@pytest.mark.slow
def test_outputs_too_large_to_send_are_not_runnable(tmp_path: Path) -> None:
    problem = tmp_path / "big.py"
    problem.write_text(BIG_OUTPUT)
    candidate = tmp_path / "cand.py"
    candidate.write_text(BIG_OUTPUT.replace("class Model(", "class ModelNew("))
    out = tmp_path / "run"
    cmd = [
        sys.executable, "-m", "opbench.cli", "run", "--problem", str(problem),
        "--candidate", str(candidate), "--device", "cpu", "--no-perf", "--n-correctness", "1",
        "--max-problem-bytes", str(1 << 40), "--out", str(out), "--quiet",
    ]  # fmt: skip
    subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    summary = json.loads((out / "summary.json").read_text())
    reasons = list((summary.get("not_runnable") or {}).values())
    assert len(reasons) == 1, summary
    assert "exceed the 8 GiB a worker can send" in reasons[0]
    assert "16.00 GiB" in reasons[0]
