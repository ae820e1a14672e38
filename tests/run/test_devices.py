"""Devices opbench does not judge on are refused before anything starts."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from opbench.run.session import RunError, check_device


@pytest.mark.parametrize("device", ["mps", "xpu", "cpu:1", "cuda:x", "meta"])
def test_unsupported_devices_are_refused_naming_what_is_supported(device: str) -> None:
    with pytest.raises(RunError, match="cpu, cuda or cuda:N"):
        check_device(device)


def test_a_rocm_build_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.version, "hip", "6.2.0", raising=False)
    with pytest.raises(RunError, match="ROCm build"):
        check_device("cuda")


def test_cpu_is_accepted() -> None:
    check_device("cpu")


@pytest.mark.slow
def test_the_cli_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "run"
    r = subprocess.run(
        [sys.executable, "-m", "opbench.cli", "run", "--device", "mps", "--out", str(out)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert r.returncode == 2 and "not supported" in r.stderr + r.stdout
    assert not out.exists()
