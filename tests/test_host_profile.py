"""``benchmarks/reproduce/host_profile.py --split``: the rows of one half of the traces
alone (the held-out rows a judged run times), each profiled case under its own key."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")

REPO = Path(__file__).resolve().parents[1]
SPLIT = json.loads((REPO / "src" / "opbench" / "suites" / "trace_split.json").read_text())


def _traces(tmp_path: Path) -> Path:
    """A traces folder of one tuning and one held-out model of one folder, each calling
    relu on a shape of its own."""
    folder = tmp_path / "traces" / "hf_train"
    folder.mkdir(parents=True)
    tuning, heldout = SPLIT["tuning"]["hf_train"][0], SPLIT["heldout"]["hf_train"][0]
    for model, shapes in ((tuning, ["[3, 5]"]), (heldout, ["[7, 11]", "[13, 2]"])):
        lines = ["Operator: aten.relu.default"]
        lines += [f"cnt: {9 - i}, ((T({s}, f32),), {{}})" for i, s in enumerate(shapes)]
        (folder / f"{model}.txt").write_text("\n".join(lines) + "\n")
    return tmp_path / "traces"


@pytest.mark.slow  # a subprocess importing torch and triton: 7-8 s a case
@pytest.mark.parametrize("split", ["heldout", "tuning"])
def test_a_split_profiles_its_half_alone(tmp_path: Path, split: str) -> None:
    out = tmp_path / "host.json"
    cmd = [sys.executable, str(REPO / "benchmarks" / "reproduce" / "host_profile.py"),
           "--traces", str(_traces(tmp_path)), "--out", str(out), "--python-only",
           "--ops", "relu", "--limit-per-op", "5", "--split", split, "--profile",
           "--profile-cases", "2"]  # fmt: skip
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO / "src")}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["split"] == split
    shapes = [row["args"].split("T(")[1].split("]")[0] + "]" for row in result["rows"]]
    if split == "heldout":
        assert shapes == ["[7, 11]", "[13, 2]"]  # most used first, the tuning model's absent
        assert set(result["profiles"]) == {"relu.default", "relu.default#1"}
    else:
        assert shapes == ["[3, 5]"]
        assert set(result["profiles"]) == {"relu.default"}
