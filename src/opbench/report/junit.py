"""A run as JUnit XML (``opbench run --junit FILE``): one test case per operator, so a
backend's own CI (GitHub Actions, GitLab, Jenkins) shows each operator as a test.

An operator that is not correct is a ``<failure>`` with its failure categories and the
first failing tests' messages; one without a verdict (``not_tested``) is ``<skipped>``
with the reason; speedups go in ``<properties>`` and the test case's ``time`` is the
time its tests took in the workers.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from opbench.run.store import TestResult

__all__ = ["to_junit", "write_junit"]

#: Failing tests quoted per operator (the rest are counted).
QUOTED_FAILURES = 5


def to_junit(summary: dict[str, Any], results: Iterable[TestResult]) -> ET.ElementTree:
    """The JUnit tree of a run's summary and its per-test results."""
    by_op: dict[str, list[TestResult]] = {}
    for r in results:
        by_op.setdefault(f"aten.{r.op}", []).append(r)
    suite_name = f"opbench.{summary.get('suite')}.{summary.get('backend')}"
    ops = summary.get("ops") or {}
    not_tested = summary.get("not_tested") or {}
    failures = sum(1 for v in ops.values() if not v.get("correct"))
    root = ET.Element("testsuites", name="opbench")
    suite = ET.SubElement(
        root,
        "testsuite",
        name=suite_name,
        tests=str(len(ops) + len(not_tested)),
        failures=str(failures),
        errors="0",
        skipped=str(len(not_tested)),
        time=f"{sum(r.duration_s or 0 for rs in by_op.values() for r in rs):.3f}",
    )
    props = ET.SubElement(suite, "properties")
    for key in ("device", "correctness_score", "performance_score", "performance_score_host"):
        ET.SubElement(props, "property", name=key, value=str(summary.get(key)))
    for op, v in sorted(ops.items()):
        rs = by_op.get(op, [])
        case = ET.SubElement(
            suite,
            "testcase",
            classname=suite_name,
            name=op,
            time=f"{sum(r.duration_s or 0 for r in rs):.3f}",
        )
        cp = ET.SubElement(case, "properties")
        for key in ("tests", "passed", "speedup", "speedup_host"):
            ET.SubElement(cp, "property", name=key, value=str(v.get(key)))
        if v.get("correct"):
            continue
        cats = ", ".join(f"{k}={n}" for k, n in (v.get("failures") or {}).items())
        failing = [r for r in rs if r.status not in ("passed", "skipped", "judge_error")]
        lines = [
            f"{r.test_id} [{r.category or r.status}] {r.args[:300]}: {(r.message or '')[:500]}"
            for r in failing[:QUOTED_FAILURES]
        ]
        if len(failing) > QUOTED_FAILURES:
            lines.append(f"... and {len(failing) - QUOTED_FAILURES} more failing tests")
        failure = ET.SubElement(
            case,
            "failure",
            message=cats or v.get("note") or "not correct",
            type=next(iter(v.get("failures") or {}), "not_correct"),
        )
        failure.text = "\n".join(lines) + "\nReproduce one with: opbench repro RUN_DIR TEST_ID"
    for op, why in sorted(not_tested.items()):
        case = ET.SubElement(suite, "testcase", classname=suite_name, name=op, time="0")
        ET.SubElement(case, "skipped", message=str(why))
    return ET.ElementTree(root)


def write_junit(path: Path, summary: dict[str, Any], results: Iterable[TestResult]) -> None:
    tree = to_junit(summary, results)
    ET.indent(tree)
    path.parent.mkdir(parents=True, exist_ok=True)
    tree.write(path, encoding="utf-8", xml_declaration=True)
