"""Before and after on the same tests: two runs' ``results.sqlite`` (finished or not),
matched by test id, per op and overall (geomeans of device and host-inclusive speedups
over eager, and host-inclusive on the cases whose eager device time is 20 µs or more).

``opbench compare`` ranks finished runs and refuses runs measured under different
settings; this is the lighter tool for a run cut short by a device call's time limit,
where only the tests both runs reached can be compared.

Usage: python benchmarks/run_delta.py OLD_RUN NEW_RUN --out benchmarks/results/NAME
       [--label-old TEXT] [--label-new TEXT]   (writes NAME.json and NAME.md)
"""

from __future__ import annotations

import argparse
import json
import math
import sqlite3
from collections import defaultdict
from pathlib import Path
from typing import Any

#: eager device time (ms) from which a backend's launch cost should no longer show
LONG_CASE_MS = 0.020


def _rows(run: Path) -> dict[str, dict[str, Any]]:
    con = sqlite3.connect(run / "results.sqlite")
    cols = ["test_id", "op", "status", "speedup", "speedup_host", "ref_device_ms"]
    rows = {r[0]: dict(zip(cols, r)) for r in con.execute(f"select {', '.join(cols)} from results")}
    con.close()
    return rows


def _gm(values: list[float]) -> float | None:
    values = [v for v in values if v and v > 0]
    return round(math.exp(sum(map(math.log, values)) / len(values)), 3) if values else None


def delta(old: Path, new: Path) -> dict[str, Any]:
    a, b = _rows(old), _rows(new)
    both = [t for t in b if t in a and a[t]["speedup"] and b[t]["speedup"]]
    long = [t for t in both if (a[t]["ref_device_ms"] or 0) >= LONG_CASE_MS]

    def side(rows: dict[str, dict[str, Any]], ids: list[str]) -> dict[str, Any]:
        return {
            "device": _gm([rows[t]["speedup"] for t in ids]),
            "host": _gm([rows[t]["speedup_host"] for t in ids]),
        }

    per_op: dict[str, list[str]] = defaultdict(list)
    for t in both:
        per_op[b[t]["op"]].append(t)
    return {
        "old_tests": len(a),
        "new_tests": len(b),
        "new_not_passed": sorted(t for t, r in b.items() if r["status"] != "passed"),
        "common_tests": len(both),
        "overall": {"old": side(a, both), "new": side(b, both)},
        "long_cases_host": {
            "tests": len(long),
            "old": side(a, long)["host"],
            "new": side(b, long)["host"],
        },
        "per_op": {
            op: {"tests": len(ids), "old": side(a, ids), "new": side(b, ids)}
            for op, ids in sorted(per_op.items())
        },
    }


def render(d: dict[str, Any], old_label: str, new_label: str) -> list[str]:
    o, n = d["overall"]["old"], d["overall"]["new"]
    lc = d["long_cases_host"]
    lines = [
        f"Tests both runs reached: {d['common_tests']} (old run {d['old_tests']} tests, "
        f"new run {d['new_tests']}; not passed in the new run: {len(d['new_not_passed'])}).",
        "",
        f"- old: {old_label}",
        f"- new: {new_label}",
        "",
        "| measure (geomean over eager) | old | new |",
        "|---|---|---|",
        f"| device time | {o['device']} | {n['device']} |",
        f"| host-inclusive | {o['host']} | {n['host']} |",
        f"| host-inclusive, eager >= 20 µs ({lc['tests']} tests) | {lc['old']} | {lc['new']} |",
        "",
        "| op | tests | device old | device new | host old | host new |",
        "|---|---|---|---|---|---|",
    ]
    for op, v in d["per_op"].items():
        lines.append(
            f"| {op} | {v['tests']} | {v['old']['device']} | {v['new']['device']} | "
            f"{v['old']['host']} | {v['new']['host']} |"
        )
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path)
    ap.add_argument("--out", type=Path, required=True, help="path without suffix")
    ap.add_argument("--label-old", default="old run")
    ap.add_argument("--label-new", default="new run")
    ap.add_argument("--title", default="Before and after, same tests")
    opt = ap.parse_args()
    d = delta(opt.old, opt.new)
    d["labels"] = {"old": opt.label_old, "new": opt.label_new}
    opt.out.with_suffix(".json").write_text(json.dumps(d, indent=1))
    md = [f"# {opt.title}", "", *render(d, opt.label_old, opt.label_new)]
    opt.out.with_suffix(".md").write_text("\n".join(md) + "\n")
    print("\n".join(md[:14]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
