"""CI gating: ``--junit`` (one JUnit test case per operator), ``--json``,
``--fail-under-perf``."""

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

_WRONG_RELU = """
import numpy as np
import torch

def relu_kernel_impl(x):
    a = x.detach().cpu().numpy()
    return torch.from_numpy(np.abs(a)).to(x.device)  # abs, not relu: wrong on negatives
"""
_RIGHT_NEG = """
import numpy as np
import torch

def neg_kernel_impl(x):
    return torch.from_numpy(-x.detach().cpu().numpy()).to(x.device)
"""


def _opbench(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "opbench.cli", *args], capture_output=True, text=True, env=env
    )


@pytest.mark.slow
def test_junit_has_a_failing_case_per_wrong_op_and_json_goes_to_stdout(tmp_path: Path) -> None:
    kernels = tmp_path / "kernels"
    for op, src in (("relu", _WRONG_RELU), ("neg", _RIGHT_NEG)):
        (kernels / op).mkdir(parents=True)
        (kernels / op / f"{op}_implementation.py").write_text(src)
    xml_path = tmp_path / "junit.xml"
    r = _opbench(
        "run", "--suite", "smoke", "--backend", str(kernels), "--device", "cpu",
        "--ops", "relu.default,neg.default", "--no-perf", "--out", str(tmp_path / "run"),
        "--json", "--junit", str(xml_path),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)  # nothing but the summary on stdout
    assert summary["ops"]["aten.relu.default"]["correct"] is False
    suite = ET.parse(xml_path).getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "1"
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    failure = cases["aten.relu.default"].find("failure")
    assert failure is not None and failure.get("type") == "wrong_result"
    assert "relu.default" in (failure.text or "") and "opbench repro" in (failure.text or "")
    assert cases["aten.neg.default"].find("failure") is None


@pytest.mark.slow
def test_fail_under_perf_gates_on_the_performance_score(tmp_path: Path) -> None:
    args = ("run", "--suite", "smoke", "--backend", "aten", "--device", "cpu", "--ops", "relu")
    ok = _opbench(*args, "--out", str(tmp_path / "a"), "--quiet", "--fail-under-perf", "0.5")
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip() == ""  # --quiet: no table
    # aten against itself is ~1.0: a bar of 10 cannot be met
    bad = _opbench(*args, "--out", str(tmp_path / "b"), "--quiet", "--fail-under-perf", "10")
    assert bad.returncode == 1 and "below --fail-under-perf" in bad.stderr
    no_timing = _opbench(*args, "--out", str(tmp_path / "c"), "--no-perf", "--fail-under-perf", "1")
    assert no_timing.returncode != 0 and "needs timing" in no_timing.stderr + no_timing.stdout
