"""The GPU run scripts (``benchmarks/gpu/*.sh``): valid bash, and every ``opbench run``
(``python3 -m opbench.cli run``) flag they pass is one the CLI has, so a renamed flag fails here and not on a lent GPU
machine's clock."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((REPO / "benchmarks" / "gpu").glob("*.sh"))


@pytest.mark.parametrize("script", [*SCRIPTS, REPO / "benchmarks/common/gpu_env.sh"],
                         ids=lambda p: p.name)  # fmt: skip
def test_scripts_parse(script: Path) -> None:
    subprocess.run(["bash", "-n", str(script)], check=True)


def test_opbench_run_flags_exist() -> None:
    help_text = subprocess.run(
        [sys.executable, "-m", "opbench.cli", "run", "--help"], capture_output=True,
        text=True, check=True, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    ).stdout  # fmt: skip
    used = set()
    for script in SCRIPTS:
        text = script.read_text()
        for cmd in re.findall(r"opbench(?:\.cli)? run\b[^)]*\)", text, flags=re.S):
            used |= set(re.findall(r"(--[a-z][a-z-]+)", cmd))
        used |= set(re.findall(r"CMD\+=\((--[a-z][a-z-]+)\)", text))
    assert {"--trace-split", "--resume", "--limit-per-op"} <= used, used
    missing = sorted(f for f in used if f not in help_text)
    assert not missing, missing
