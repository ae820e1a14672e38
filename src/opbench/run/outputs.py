"""What a finished run leaves in its run directory besides ``results.sqlite``:
``summary.json`` (written atomically), ``report.html``, ``tests.parquet`` (with pyarrow)
and ``ops.csv``. Runs in the HARNESS, for operator and program runs alike.
"""

from __future__ import annotations

import csv
import json
import logging
from pathlib import Path
from typing import Any

from opbench.run.store import TestResult

__all__ = ["write_outputs"]

log = logging.getLogger(__name__)


def write_outputs(out: Path, summary: dict[str, Any], results: list[TestResult]) -> None:
    """summary.json (atomically), ops.csv and report.html."""
    from opbench.report.html import render

    tmp = out / "summary.json.tmp"
    tmp.write_text(json.dumps(summary, indent=2, default=str))
    tmp.replace(out / "summary.json")
    (out / "report.html").write_text(render(summary, results))
    from opbench.report.export import write_tests_parquet

    if not write_tests_parquet(out / "tests.parquet", results):
        log.info("no tests.parquet: pyarrow is not installed (pip install 'opbench[parquet]')")
    with open(out / "ops.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            [
                "op",
                "tests",
                "passed",
                "weak",
                "not_implemented",
                "correct",
                "speedup",
                "speedup_host",
                "failures",
            ]
        )
        for op, v in summary["ops"].items():
            w.writerow(
                [
                    op,
                    v.get("tests"),
                    v.get("passed"),
                    v.get("weak", 0),
                    v.get("not_implemented", 0),
                    v.get("correct"),
                    v.get("speedup"),
                    v.get("speedup_host"),
                    ";".join(f"{k}={n}" for k, n in (v.get("failures") or {}).items()),
                ]
            )
