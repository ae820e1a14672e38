"""With timing, the last timed call's output is judged too: a ``ModelNew`` that answers
right for the correctness trials and then returns garbage (cheap) once it is called
over and over is ``cheat``, and so is one that hands back the answer it remembered for
the same input tensor, while an honest one passes with its speedup. Through the real
CLI on the CPU."""

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
    def __init__(self, n):
        super().__init__()
        self.fc = nn.Linear(n, n)

    def forward(self, x):
        return torch.relu(self.fc(x))


def get_inputs():
    return [torch.randn(64, 32)]


def get_init_inputs():
    return [32]
"""

HONEST = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = nn.Linear(n, n)

    def forward(self, x):
        return torch.clamp_min(self.fc(x), 0.0)
"""

# right for the first calls (the correctness trials), then an uninitialised tensor
COUNTING = HONEST.replace(
    "        return torch.clamp_min(self.fc(x), 0.0)",
    """        self.calls = getattr(self, "calls", 0) + 1
        if self.calls > 8:
            return torch.empty(x.shape[0], self.fc.out_features).fill_(0.5)
        return torch.clamp_min(self.fc(x), 0.0)""",
)

# computes once per input object (and version), then returns what it remembered: right
# for every trial (fresh tensors), and for every timed call whose tensor kept its values
REMEMBERING = HONEST.replace(
    "        return torch.clamp_min(self.fc(x), 0.0)",
    """        seen = getattr(self, "seen", None)
        if seen is not None and seen[0] is x and seen[1] == x._version:
            return seen[2]
        out = torch.clamp_min(self.fc(x), 0.0)
        self.seen = (x, x._version, out)
        return out""",
)


# lazy only while device-timed: the device loop reuses one input tensor, the host rounds
# and the trials give fresh ones; honest for good once a long run of fresh inputs shows
# the host rounds have begun (so the last calls, always judged, are computed)
DEVICE_LAZY = HONEST.replace(
    "        return torch.clamp_min(self.fc(x), 0.0)",
    """        seen = getattr(self, "seen", None)
        same = seen is not None and seen[0] is x
        self.fresh = 0 if same else getattr(self, "fresh", 0) + 1
        self.honest = getattr(self, "honest", False) or self.fresh >= 50
        if same and not self.honest:
            return seen[1].clone()
        out = torch.clamp_min(self.fc(x), 0.0)
        self.seen = (x, out)
        return out""",
)


@pytest.mark.slow
def test_a_candidate_that_stops_computing_once_timed_is_caught(tmp_path: Path) -> None:
    root, cands = tmp_path / "problems", tmp_path / "candidates"
    for name, cand in (("1_honest", HONEST), ("2_counting", COUNTING), ("3_remember", REMEMBERING),
                       ("4_device_lazy", DEVICE_LAZY)):  # fmt: skip
        for folder, text in ((root, PROBLEM), (cands, cand)):
            (folder / "level1").mkdir(parents=True, exist_ok=True)
            (folder / "level1" / f"{name}.py").write_text(text)
    proc = subprocess.run(
        [
            sys.executable, "-m", "opbench.cli", "run", "--suite", f"programs:{root}",
            "--candidates", str(cands), "--device", "cpu", "--perf", "--quiet", "--json",
            "--out", str(tmp_path / "run"),
        ],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    problems = json.loads(proc.stdout)["problems"]
    honest, counting = problems["level1/1_honest"], problems["level1/2_counting"]
    assert honest["correct"] and honest["speedup"] is not None
    assert not counting["correct"] and counting["category"] == "cheat"
    assert "timed call" in counting["message"]
    remember = problems["level1/3_remember"]
    assert not remember["correct"] and remember["category"] == "cheat", remember
    assert "timing draw 1" in remember["message"]
    lazy = problems["level1/4_device_lazy"]
    assert not lazy["correct"] and lazy["category"] == "cheat", lazy
    assert "device-timed" in lazy["message"]
