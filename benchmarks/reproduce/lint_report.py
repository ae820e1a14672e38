"""Turn ``opbench lint-problems --journal`` files into a committed result: one JSON with
every file's findings and a Markdown table a person reads (counts per check and level,
then each finding with its evidence).

The journals are what a GPU call leaves even when it is cut off, so a level that did not
finish is reported as "N of M files linted" rather than lost.

Usage:
    python benchmarks/reproduce/lint_report.py --journal .gpu_data/runs/lint-kb-level1.jsonl \
        --journal .gpu_data/runs/lint-kb-level2.jsonl --suite ../shared/kernelbench \
        --out benchmarks/results/lint-kernelbench-h100 --title "KernelBench levels 1-3"

Committed result: ``benchmarks/results/lint-kernelbench-h100.json`` and ``.md`` (the command
above, over the journals of ``opbench lint-problems KERNELBENCH_DIR/levelN --device cuda
--json --journal J.jsonl`` for levels 1-3).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from opbench.programs.lint import CHECKS, read_journal


def _level(path: str) -> str:
    parts = Path(path).parts
    return next((p for p in reversed(parts[:-1]) if p.startswith("level")), "?")


def _short(path: str) -> str:
    return f"{_level(path)}/{Path(path).stem}"


def collect(journals: list[Path], suite: Path | None) -> dict[str, Any]:
    """Every journal's files, findings and skips, with how many files each level has."""
    files: dict[str, dict[str, Any]] = {}
    sizes, devices = set(), set()
    for journal in journals:
        first = json.loads(journal.read_text().splitlines()[0])
        size, device = first["size"], first["device"]
        sizes.add(size)
        devices.add(device)
        for path, (findings, skipped) in read_journal(journal, size, device).items():
            files[_short(path)] = {
                "device": device,
                "skipped": skipped,
                "findings": [{k: v for k, v in asdict(f).items() if k != "path"} for f in findings],
            }
    levels: dict[str, dict[str, Any]] = {}
    for name, rec in files.items():
        lv = levels.setdefault(name.split("/")[0], {"linted": 0, "skipped": 0, "by_check": {}})
        lv["linted"] += 1
        lv["skipped"] += bool(rec["skipped"])
        for f in rec["findings"]:
            lv["by_check"][f["check"]] = lv["by_check"].get(f["check"], 0) + 1
    for name, lv in levels.items():
        if suite is not None and (suite / name).is_dir():
            lv["files"] = len(list((suite / name).glob("*.py")))
        lv["with_findings"] = sum(
            1 for k, r in files.items() if k.startswith(name + "/") and r["findings"]
        )
    # a level may be linted partly on a GPU and the rest on the CPU: each file says where
    return {
        "size": ", ".join(sorted(sizes)),
        "device": ", ".join(sorted(devices)),
        "levels": levels,
        "files": files,
    }


def markdown(data: dict[str, Any], title: str, command: str) -> str:
    out = [f"# Problem lints: {title}", ""]
    out.append(
        f"Device: {data['device']}, size {data['size']}. Command: `{command}`. Each problem "
        "runs with fixed weights and inputs from three seeds; a finding means an answer that "
        "does not compute the model passes a judge comparing at atol = rtol = 1e-2 "
        "(`opbench lint-problems --help`)."
    )
    out += ["", "| level | linted | of | skipped | with findings | " + " | ".join(CHECKS) + " |"]
    out.append("| --- " * (5 + len(CHECKS)) + "|")
    for name, lv in sorted(data["levels"].items()):
        counts = " | ".join(str(lv["by_check"].get(c, "")) for c in CHECKS)
        out.append(
            f"| {name} | {lv['linted']} | {lv.get('files', '?')} | {lv['skipped']} | "
            f"{lv['with_findings']} | {counts} |"
        )
    out += ["", "| problem | check | evidence |", "| --- | --- | --- |"]
    for name, rec in data["files"].items():
        for f in rec["findings"]:
            msg = f["message"].replace("|", "/")
            out.append(f"| {name} | `{f['check']}` | {msg} ({rec['device']}) |")
        if rec["skipped"]:
            out.append(
                f"| {name} | skipped | {rec['skipped'].replace('|', '/')} ({rec['device']}) |"
            )
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--journal", type=Path, action="append", required=True)
    ap.add_argument("--suite", type=Path, help="the problem folder, to count each level's files")
    ap.add_argument("--out", type=Path, required=True, help="writes OUT.json and OUT.md")
    ap.add_argument("--title", default="problem set")
    ap.add_argument("--command", default="opbench lint-problems LEVEL --device cuda --journal J")
    args = ap.parse_args()
    data = collect(args.journal, args.suite)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(data, indent=1) + "\n")
    args.out.with_suffix(".md").write_text(markdown(data, args.title, args.command))
    print(json.dumps(data["levels"]))


if __name__ == "__main__":
    main()
