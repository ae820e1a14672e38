"""Two backends judged in turns on one machine (ours, theirs, ours, theirs, ...): per op,
is one side ahead in every run, or do their runs overlap?

Why: ``heldout_versus.py`` sets two runs side by side, often from two lends, and names
an op "ahead" on any difference. On 3-7 µs calls one backend moves 1-4% from one run to
the next (2026-11-30, H200: our ``hardsigmoid`` 1.081 then 1.102 device, FlagGems'
1.179 then 1.122), so a lead read from one run of each can be the order the runs came
in. Here each side runs several times on the same machine, alternating, and an op's
verdict is a lead only where every run of one side is above every run of the other.

Input: run directories of ``opbench run`` (each with ``results.sqlite``), named with
``--ours`` and ``--theirs`` (the same commands but ``--backend``, alternating:
``benchmarks/gpu/alternate_run.sh`` makes them). Only tests that passed in every run
are compared; an op's number in a run is the geomean over those tests of that run's
device speedup over eager (``--measure host``: host-inclusive).

Usage: python benchmarks/reproduce/alternate_report.py --ours A1 A2 --theirs B1 B2
    --names triton,flag_gems --out benchmarks/results/NAME   (writes NAME.md and NAME.json)
"""

from __future__ import annotations

import argparse
import json
import math
import sqlite3
from pathlib import Path
from typing import Any

from opbench.report.metrics import geomean

COLUMN = {"device": "speedup", "host": "speedup_host"}


def read_run(run: str | Path, measure: str = "device") -> dict[tuple[str, str], float | None]:
    """(op, args) -> the run's speedup over eager (None where the test did not pass)."""
    db = Path(run) / "results.sqlite"
    if not db.exists():
        raise SystemExit(f"{run}: no results.sqlite (not an opbench run directory)")
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = con.execute(f"SELECT op, args, status, {COLUMN[measure]} FROM results").fetchall()
    finally:
        con.close()
    return {(op, args): (v if status == "passed" and v and v > 0 else None)
            for op, args, status, v in rows}  # fmt: skip


def compare(ours: list[dict], theirs: list[dict]) -> dict[str, Any]:
    """Per op, each run's geomean over the tests every run passed, and the verdict:
    ``ours`` / ``theirs`` where every run of that side is above every run of the other,
    else ``overlap``."""
    runs = ours + theirs
    common = set.intersection(*(set(r) for r in runs))
    passed = sorted(k for k in common if all(r[k] is not None for r in runs))
    ops: dict[str, Any] = {}
    for op in sorted({op for op, _ in passed}):
        keys = [k for k in passed if k[0] == op]
        a = [geomean(r[k] for k in keys) for r in ours]
        b = [geomean(r[k] for k in keys) for r in theirs]
        verdict = "ours" if min(a) > max(b) else "theirs" if min(b) > max(a) else "overlap"
        ops[op] = {"tests": len(keys), "ours": a, "theirs": b, "verdict": verdict}
    left_out = sorted({op for op, _ in common} - set(ops))
    # a permutation test's p-value for "every run of one given side above the other's"
    chance = 1 / math.comb(len(ours) + len(theirs), len(ours))
    return {"ops": ops, "left_out": left_out, "chance": chance}


def markdown(result: dict[str, Any], names: tuple[str, str], measure: str,
             dirs: tuple[list[str], list[str]]) -> str:  # fmt: skip
    a, b = names
    ops = result["ops"]
    lines = [
        f"# {a} and {b} in turns on one machine ({measure} speedup over eager)",
        "",
        f"- {a}: {', '.join(f'`{d}`' for d in dirs[0])}",
        f"- {b}: {', '.join(f'`{d}`' for d in dirs[1])}",
        "- made with `python benchmarks/reproduce/alternate_report.py --ours ... --theirs "
        f"... --names {a},{b} --measure {measure}`",
        "",
        "Per op, each run's geomean over the tests every run passed (> 1: faster than eager "
        "in that run's own judge). A side is ahead only where every one of its runs is "
        "above every run of the other; else the runs overlap. Were the two backends alike, "
        "runs in any order would be equally likely, and one given side would come out "
        f"ahead by chance alone with probability {result['chance']:.1%} "
        f"(1 / C({len(dirs[0]) + len(dirs[1])}, {len(dirs[0])})): more runs a side make "
        "a lead mean more.",
        "",
        f"| op | tests | {a} runs | {b} runs | ahead |",
        "| --- | --- | --- | --- | --- |",
    ]
    for op, r in ops.items():
        ahead = {"ours": a, "theirs": b, "overlap": "neither (runs overlap)"}[r["verdict"]]
        lines.append(
            f"| {op} | {r['tests']} | {' / '.join(f'{x:.3f}' for x in r['ours'])} "
            f"| {' / '.join(f'{x:.3f}' for x in r['theirs'])} | {ahead} |"
        )
    for side, label in (("ours", a), ("theirs", b)):
        won = [op for op, r in ops.items() if r["verdict"] == side]
        lines += [
            "",
            f"{label} ahead in every run on: "
            + (", ".join(f"`{o}`" for o in won) or "no op")
            + ".",
        ]
    if result["left_out"]:
        lines += ["", "Left out (a test failed in some run): "
                  + ", ".join(f"`{o}`" for o in result["left_out"]) + "."]  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ours", nargs="+", required=True, help="our runs' directories")
    p.add_argument("--theirs", nargs="+", required=True, help="their runs' directories")
    p.add_argument("--names", default="ours,theirs")
    p.add_argument("--measure", choices=sorted(COLUMN), default="device")
    p.add_argument("--out", required=True, help="path without suffix: .md and .json")
    ns = p.parse_args()
    names = tuple(ns.names.split(","))
    if len(names) != 2:
        raise SystemExit("--names takes two names, a comma between")
    result = compare([read_run(d, ns.measure) for d in ns.ours],
                     [read_run(d, ns.measure) for d in ns.theirs])  # fmt: skip
    result.update(names=list(names), measure=ns.measure, ours=ns.ours, theirs=ns.theirs)
    out = Path(ns.out)
    text = markdown(result, names, ns.measure, (ns.ours, ns.theirs))
    out.with_suffix(".md").write_text(text)
    out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
