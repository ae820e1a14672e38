"""A problem a lazy candidate passes (outputs so small that zeros are within tolerance)
is judged ``weak``: the passing candidate is left out of the verdict and the problem is
listed under ``weak``, out of the denominator, instead of rewarding a ``ModelNew`` that
returns zeros. The same zeros on an ordinary problem stay ``wrong_result``. Through the
real CLI on the CPU."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return torch.tanh(x) * self.scale


def get_inputs():
    return [torch.randn(16, 32)]


def get_init_inputs():
    return [{scale}]
"""

ZEROS = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()

    def forward(self, x):
        return torch.zeros_like(x)
"""


@pytest.mark.slow
def test_zeros_pass_a_tiny_output_problem_only_as_weak(tmp_path: Path) -> None:
    root, cands = tmp_path / "problems", tmp_path / "candidates"
    for name, scale in (("1_tiny", "1e-9"), ("2_normal", "1.0")):
        for folder, text in ((root, PROBLEM.format(scale=scale)), (cands, ZEROS)):
            (folder / "level1").mkdir(parents=True, exist_ok=True)
            (folder / "level1" / f"{name}.py").write_text(text)
    out = tmp_path / "run"
    proc = subprocess.run(
        [
            sys.executable, "-m", "opbench.cli", "run", "--suite", f"programs:{root}",
            "--candidates", str(cands), "--device", "cpu", "--no-perf", "--quiet", "--json",
            "--out", str(out),
        ],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    summary = json.loads(proc.stdout)
    assert list(summary["weak"]) == ["level1/1_tiny"]
    assert "zeros" in summary["weak"]["level1/1_tiny"]
    tiny = summary["problems"]["level1/1_tiny"]
    assert tiny["status"] == "passed" and "weak problem" in tiny["message"]
    normal = summary["problems"]["level1/2_normal"]
    assert normal["category"] == "wrong_result"
    # the weak problem is out of the denominator: the one judged problem failed
    assert summary["correctness_score"] == 0.0
    assert "level1/1_tiny" not in summary["ops"]
