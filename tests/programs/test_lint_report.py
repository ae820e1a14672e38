"""``benchmarks/reproduce/lint_report.py``: lint journals (what a cut-off GPU call leaves) become the
committed JSON and table, with each level's "N of M files" and every finding."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from opbench.programs.lint import lint_problems

PROBLEM = """import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x, y):
        return {expr}

def get_inputs():
    return [torch.randn(64), torch.randn(64)]

def get_init_inputs():
    return []
"""
SOUND = PROBLEM.format(expr="x * y")
TINY = PROBLEM.format(expr="(x * y) * 1e-4")  # zeros pass atol 1e-2

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location(
        "lint_report", ROOT / "benchmarks/reproduce/lint_report.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_journals_become_counts_per_level_and_every_finding(tmp_path):
    suite = tmp_path / "suite"
    for level, files in {
        "level1": {"1_sound": SOUND, "2_tiny": TINY},
        "level2": {"1_ok": SOUND},
    }.items():
        (suite / level).mkdir(parents=True)
        for name, text in files.items():
            (suite / level / f"{name}.py").write_text(text)
    (suite / "level1" / "3_not_linted.py").write_text(SOUND)  # a cut-off lint: 2 of 3
    journals = []
    for level, names in {"level1": ["1_sound", "2_tiny"], "level2": ["1_ok"]}.items():
        journal = tmp_path / f"{level}.jsonl"
        for name in names:
            lint_problems(suite / level / f"{name}.py", journal=journal)
        journals.append(journal)

    report = _script()
    data = report.collect(journals, suite)
    assert data["levels"]["level1"] == {
        "linted": 2, "skipped": 0, "by_check": {"tiny_output": 1}, "files": 3, "with_findings": 1
    }  # fmt: skip
    assert data["levels"]["level2"]["with_findings"] == 0
    assert [f["check"] for f in data["files"]["level1/2_tiny"]["findings"]] == ["tiny_output"]
    md = report.markdown(data, "a test", "cmd")
    assert "| level1 | 2 | 3 | 0 | 1 |" in md
    assert "| level1/2_tiny | `tiny_output` |" in md
    json.dumps(data)  # what is committed must be plain JSON
