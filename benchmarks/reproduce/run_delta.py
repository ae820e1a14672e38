"""Before and after on the same tests: two runs' ``results.sqlite`` (finished or not),
matched by test id, per op and overall (geomeans of device and host-inclusive speedups
over eager, and host-inclusive on the cases whose eager device time is 20 µs or more).

``opbench compare`` ranks finished runs and refuses runs measured under different
settings; this is the lighter tool for a run cut short by a device call's time limit,
where only the tests both runs reached can be compared.

NEW_RUN may be given several times (runs of disjoint tests, such as two device calls'
worth of one suite, merged). OLD_RUN may also be a committed ``summary.json``-style file
(``benchmarks/results/triton-<gpu>.json``) whose run directory is gone: then only its
per-op geomeans are known, and the comparison is per op, on the new runs' tests (the
same selection rule, ``--limit-per-op`` most used cases, picks the same tests).

Usage: python benchmarks/reproduce/run_delta.py OLD_RUN NEW_RUN [NEW_RUN ...] --out benchmarks/results/NAME
       [--label-old TEXT] [--label-new TEXT]   (writes NAME.json and NAME.md)

Committed results: ``benchmarks/results/triton-h100-host-paths.md``/``.json`` (2026-11-23),
``triton-h100-host-path-2.md``/``.json`` (2026-11-25) and ``triton-h100-2026-11-25-changed.json``
(section 1 of ``triton-h100-2026-11-25.md``), each against the committed ``triton-h100.json``
of its day:
    python benchmarks/reproduce/run_delta.py benchmarks/results/triton-h100.json NEW_RUN \
        --out benchmarks/results/triton-h100-host-path-2
"""

from __future__ import annotations

import argparse
import json
import sqlite3
from collections import defaultdict
from pathlib import Path
from typing import Any

from opbench.report.means import geomean_of_timed

#: eager device time (ms) from which a backend's launch cost should no longer show
LONG_CASE_MS = 0.020


def _rows(*runs: Path) -> dict[str, dict[str, Any]]:
    cols = ["test_id", "op", "status", "speedup", "speedup_host", "ref_device_ms"]
    rows: dict[str, dict[str, Any]] = {}
    for run in runs:
        con = sqlite3.connect(run / "results.sqlite")
        query = f"select {', '.join(cols)} from results"
        rows.update({r[0]: dict(zip(cols, r)) for r in con.execute(query)})
        con.close()
    return rows


def delta_from_summary(summary: Path, *new: Path) -> dict[str, Any]:
    """Per op: the summary's geomeans (``per_op`` of a triton_backend.py result, else
    ``ops``) against the new runs' geomeans over their passed tests of that op."""
    old = json.loads(summary.read_text())
    old_ops = old.get("per_op") or old.get("ops") or {}
    b = _rows(*new)
    by_op: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in b.values():
        if r["status"] == "passed" and r["speedup"]:
            by_op[r["op"]].append(r)
    long = [r for rs in by_op.values() for r in rs if (r["ref_device_ms"] or 0) >= LONG_CASE_MS]
    per_op = {}
    for op, rs in sorted(by_op.items()):
        o = old_ops.get(op) or old_ops.get(f"aten.{op}") or {}
        per_op[op] = {
            "tests": len(rs),
            "old": {"device": o.get("speedup"), "host": o.get("speedup_host")},
            "new": {
                "device": _gm([r["speedup"] for r in rs]),
                "host": _gm([r["speedup_host"] for r in rs]),
            },
        }
    ops = [op for op, v in per_op.items() if v["old"]["device"]]
    return {
        "old_tests": None,
        "new_tests": len(b),
        "new_not_passed": sorted(t for t, r in b.items() if r["status"] != "passed"),
        "common_tests": None,
        "common_ops": len(ops),
        "overall": {
            side: {
                k: _gm([per_op[op][side][k] for op in ops if per_op[op][side][k]])
                for k in ("device", "host")
            }
            for side in ("old", "new")
        },
        "long_cases_host": {
            "tests": len(long),
            "old": None,
            "new": _gm([r["speedup_host"] for r in long]),
        },
        "per_op": per_op,
    }


def _gm(values: list[float]) -> float | None:
    """The timed rows' geomean, to three places."""
    return None if (g := geomean_of_timed(values)) is None else round(g, 3)


def delta(old: Path, *new: Path) -> dict[str, Any]:
    a, b = _rows(old), _rows(*new)
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
    reach = (
        f"Tests both runs reached: {d['common_tests']} (old run {d['old_tests']} tests, "
        if d["common_tests"] is not None
        else f"Old: per-op geomeans of a summary, geomeans over the {d['common_ops']} ops "
        "both have (per op, not per test) ("
    )
    lines = [
        f"{reach}new run {d['new_tests']}; not passed in the new run: {len(d['new_not_passed'])}).",
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
    ap.add_argument("new", type=Path, nargs="+")
    ap.add_argument("--out", type=Path, required=True, help="path without suffix")
    ap.add_argument("--label-old", default="old run")
    ap.add_argument("--label-new", default="new run")
    ap.add_argument("--title", default="Before and after, same tests")
    opt = ap.parse_args()
    if opt.old.is_file():
        d = delta_from_summary(opt.old, *opt.new)
    else:
        d = delta(opt.old, *opt.new)
    d["labels"] = {"old": opt.label_old, "new": opt.label_new}
    opt.out.with_suffix(".json").write_text(json.dumps(d, indent=1))
    md = [f"# {opt.title}", "", *render(d, opt.label_old, opt.label_new)]
    opt.out.with_suffix(".md").write_text("\n".join(md) + "\n")
    print("\n".join(md[:14]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
