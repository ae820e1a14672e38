"""``Scorer.score_program``: ModelNew sources judged on a program problem file, each in a
sandboxed worker of its own, for reward loops over KernelBench-style problems."""

from pathlib import Path

import pytest

import opbench

PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = nn.Linear(n, n)

    def forward(self, x):
        return torch.relu(self.fc(x))


def get_inputs():
    return [torch.randn(8, 16)]


def get_init_inputs():
    return [16]
"""

RIGHT = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = nn.Linear(n, n)

    def forward(self, x):
        return torch.clamp_min(self.fc(x), 0.0)
"""
WRONG = RIGHT.replace("torch.clamp_min(self.fc(x), 0.0)", "self.fc(x).abs()")
RENAMED = RIGHT.replace("self.fc", "self.proj")  # weights no longer load by name
TAMPER = RIGHT + "\ntorch.set_num_threads(1)\n"


@pytest.mark.slow
def test_right_wrong_renamed_and_tampering_model_new(tmp_path: Path) -> None:
    problem = tmp_path / "7_linear_relu.py"
    problem.write_text(PROBLEM)
    with opbench.Scorer(device="cpu") as s:
        right = s.score_program(RIGHT, problem, n_correctness=3)
        wrong = s.score_program(WRONG, problem, n_correctness=3)
        renamed = s.score_program(RENAMED, problem, n_correctness=3)
        tamper = s.score_program(TAMPER, problem, n_correctness=3)
        assert s.scored == 4
    assert right.correct and right.op == "7_linear_relu" and right.passed == 1
    assert not wrong.correct and "wrong_result" in wrong.failures
    assert not renamed.correct and "wrong_meta" in renamed.failures
    assert "state_dict" in renamed.messages[0]
    assert not tamper.correct and "tampering" in tamper.failures
