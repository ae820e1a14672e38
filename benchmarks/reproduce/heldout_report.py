"""The reference Triton backend on the traces' held-out half: a judged run directory
summarised against the targets of the held-out work.

The run: ``opbench run --suite traces --trace-split heldout --backend triton --device
cuda --perf`` (the split is ``src/opbench/suites/trace_split.json``: models by name,
tuning or held-out; held-out rows are rows no tuning model uses). This script reads the
run's store and reports: correctness; device and host geomean speedups over eager; host
on tests whose eager host time is >= 20 us, and that split by how the worker called the
kernel (through the C++ gate or as its Python function); mm/addmm/bmm on products of >= 1 GFLOP;
convolution forward and backward; one line per op. A run cut short is reported as what
it holds, and says so.

Usage: python benchmarks/reproduce/heldout_report.py RUN_DIR --command "opbench run ..."
    [--gpu h100] [--partial]
Writes benchmarks/results/triton-heldout-<gpu>[-partial].json and .md.

Committed: ``triton-heldout-h100-partial.md``/``.json``, from a run of
``--limit-per-op 4`` over the backend's served ops stopped after 320 s (2026-11-27);
``triton-heldout-h200.md``/``.json``, ``--limit-per-op 2`` over every served op, whole
(124 tests in 330 s, 2026-11-29).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sqlite3
import sys
from pathlib import Path
from typing import Any

from opbench.report.means import geomean_of_timed

REPO = Path(__file__).resolve().parents[2]
MATMULS = ("mm.default", "addmm.default", "bmm.default")
CONVS = ("convolution.default", "convolution_backward.default")
#: how the worker called a kernel (:func:`_route`)
ROUTES = ("native", "replay", "python")


def _call_route(details: str | None) -> dict[str, Any]:
    try:
        return json.loads(details or "{}").get("call_route") or {}
    except (ValueError, AttributeError):
        return {}


def _route(details: str | None) -> tuple[str, str]:
    """``(route, why)``: ``native``, ``replay`` or ``python``, how the worker called the
    kernel in one test (the test's ``call_route``; runs before 2026-11-30 have none:
    ``python``): one elementwise launch of the C++ gate, the gate's replay of the Python
    path's launches (its counts hold replayed calls), or the Python function; and why a
    test with a declared native launch was called as its Python function (the worker's
    words), or ``""``: no declaration, no dry call taken, or the gate."""
    route = _call_route(details)
    if route.get("route") != "native":
        return "python", str(route.get("why") or "")
    replayed = (route.get("counts") or {}).get("replayed", 0)
    return ("replay" if replayed else "native"), ""


def lowest_host(rows: list[dict[str, Any]], n: int = 12) -> list[str]:
    """Markdown rows of the ``n`` lowest host ratios where eager takes >= 20 us: where
    the host number is lost, with each test's route and, for a declared kernel judged as
    its Python function, why (a reader saw the ``mul.Tensor(x, 0.125)`` tests lose their
    gate only by querying the run's store)."""
    slow = sorted((r for r in rows if (r["ref_host_ms"] or 0) >= 0.020), key=lambda r: r["host"])
    out = []
    for r in slow[:n]:
        args = r["args"] if len(r["args"]) <= 90 else r["args"][:87] + "..."
        why = f": {r['why']}" if r.get("why") else ""
        out.append(f"| {r['op']} | `{args}` | {r['ref_host_ms'] * 1e3:.1f} | {r['host']:.3f} "
                   f"| {r['speedup']:.3f} | {r['route']}{why} |")  # fmt: skip
    return out


def _route_line(d: dict[str, Any]) -> str:
    g = d["host_geomean"]
    return f"{d['tests']} tests, host {g:.3f}" if g is not None else f"{d['tests']} tests"


def _shapes(args: str) -> list[list[int]]:
    return [ast.literal_eval(m) for m in re.findall(r"T\((\[[0-9, ]*\])", args)]


def matmul_gflop(op: str, args: str) -> float | None:
    """2*M*N*K (times the batch for bmm) from the case's argument shapes."""
    s = _shapes(args)
    try:
        if op == "mm.default":
            (m, k), (_, n) = s[0], s[1]
            return 2 * m * n * k / 1e9
        if op == "addmm.default":
            (m, k), (_, n) = s[1], s[2]
            return 2 * m * n * k / 1e9
        if op == "bmm.default":
            (b, m, k), (_, _, n) = s[0], s[1]
            return 2 * b * m * n * k / 1e9
    except (IndexError, ValueError):
        return None
    return None


#: what the report keeps of each test, in the JSON's ``rows`` (merged from there by
#: ``--merge``): enough to recompute every number of the report
ROW_KEYS = ("op", "args", "status", "category", "speedup", "host", "ref_host_ms",
            "ref_device_ms", "message", "route", "why")  # fmt: skip


def store_rows(run_dir: Path) -> list[dict[str, Any]]:
    """One dict of :data:`ROW_KEYS` per test recorded in a run directory's store (none
    where a run cut at once left no store)."""
    path = Path(run_dir) / "results.sqlite"
    if not path.is_file():
        return []
    con = sqlite3.connect(path)
    try:
        if not con.execute("select 1 from sqlite_master where name = 'results'").fetchone():
            return []
        return [
            dict(zip(ROW_KEYS, (*r[:-1], *_route(r[-1]))))
            for r in con.execute(
                "select op, args, status, category, speedup, speedup_host, ref_host_ms, "
                "ref_device_ms, message, details from results"
            )
        ]
    finally:
        con.close()


def merged_rows(parts: list[Path]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The tests of several reports written by this script (their ``rows``), and one
    line a part (file, command, whether it was cut short, tests). A test in two parts is
    an error naming both: parts of one run (``opbench run --shard K/N``) are disjoint, so
    an overlap is a part merged twice or a run that was not split."""
    rows: list[dict[str, Any]] = []
    seen: dict[tuple[str, str], Path] = {}
    lines: list[dict[str, Any]] = []
    for part in parts:
        try:
            data = json.loads(Path(part).read_text())
        except (OSError, ValueError) as e:
            raise SystemExit(f"{part}: not a report of this script ({e})") from None
        if "rows" not in data:
            raise SystemExit(f"{part}: no per-test rows (written before 2026-12-02?): "
                             "report its run directory again")  # fmt: skip
        for r in data["rows"]:
            key = (r["op"], r["args"])
            if key in seen:
                raise SystemExit(f"{r['op']} {r['args']} is in both {seen[key]} and {part}")
            seen[key] = Path(part)
            rows.append({k: r.get(k) for k in ROW_KEYS})
        lines.append({"file": str(part), "command": data.get("command"), "split": data.get("split"),
                      "partial": bool(data.get("partial")), "tests": len(data["rows"])})  # fmt: skip
    return rows, lines


#: the halves of the traces a report may be of (``--half``), as its split line names them
HALF_NAMES = {"heldout": "held-out half", "tuning": "tuning half"}


def split_line(half: str) -> str:
    """The ``split`` a report of ``half`` states (and a merge checks each part's against)."""
    return f"src/opbench/suites/trace_split.json, {HALF_NAMES[half]}"


def timed_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The passed tests with both speed-ups: the ones every geomean is over."""
    return [r for r in rows if r["status"] == "passed" and r["speedup"] and r["host"]]


def summarize(rows: list[dict[str, Any]], command: str, partial: bool,
              half: str = "heldout") -> dict[str, Any]:  # fmt: skip
    """Every number of the report, from the tests' rows."""
    timed = timed_rows(rows)
    big_mm = [r for r in timed if r["op"] in MATMULS
              and (matmul_gflop(r["op"], r["args"]) or 0) >= 1.0]  # fmt: skip
    per_op: dict[str, list[dict[str, Any]]] = {}
    for r in timed:
        per_op.setdefault(r["op"], []).append(r)
    slow_host = [r for r in timed if (r["ref_host_ms"] or 0) >= 0.020]  # eager >= 20 us
    return {
        "split": split_line(half),
        "command": command,
        "partial": partial,
        "tests": len(rows),
        "passed": sum(r["status"] == "passed" for r in rows),
        "ops": len({r["op"] for r in rows}),
        "device_geomean": geomean_of_timed([r["speedup"] for r in timed]),
        "host_geomean": geomean_of_timed([r["host"] for r in timed]),
        "host_geomean_eager_ge_20us": geomean_of_timed([r["host"] for r in slow_host]),
        "tests_eager_ge_20us": len(slow_host),
        # the same on eager's device time: a lend whose host is slow puts eager's launch of
        # a 5 us kernel over 20 us (113 of 124 tests were host-bound on 2026-11-29's H200)
        "host_geomean_eager_device_ge_20us": geomean_of_timed(
            [r["host"] for r in timed if (r["ref_device_ms"] or 0) >= 0.020]
        ),
        "tests_eager_device_ge_20us": sum((r["ref_device_ms"] or 0) >= 0.020 for r in timed),
        # how the worker called the kernel (opbench.instrument.native_calls): through the
        # C++ gate, as a model does, or as its Python function
        "host_by_route_eager_ge_20us": {
            route: {
                "tests": sum(r["route"] == route for r in slow_host),
                "host_geomean": geomean_of_timed(
                    [r["host"] for r in slow_host if r["route"] == route]
                ),
            }
            for route in ROUTES
        },
        "matmul_ge_1gflop": {
            "tests": len(big_mm),
            "device_geomean": geomean_of_timed([r["speedup"] for r in big_mm]),
            "min": min((r["speedup"] for r in big_mm), default=None),
        },
        "conv": {op: geomean_of_timed([r["speedup"] for r in per_op.get(op, [])]) for op in CONVS},
        "per_op": {
            op: {
                "tests": len(rs),
                "device": geomean_of_timed([r["speedup"] for r in rs]),
                "host": geomean_of_timed([r["host"] for r in rs]),
            }
            for op, rs in sorted(per_op.items())
        },  # fmt: skip
        "not_passed": [r for r in rows if r["status"] != "passed"],
    }


def markdown(summary: dict[str, Any], rows: list[dict[str, Any]], label: str, gpu: str,
             half: str, parts: list[dict[str, Any]] | None = None) -> list[str]:  # fmt: skip
    """The report's lines; ``parts``: those of a merged report (:func:`merged_rows`)."""

    def f(x: float | None) -> str:
        return "-" if x is None else f"{x:.3f}"

    cut = " (run stopped early: what it holds)" if summary["partial"] else ""
    if parts:
        how = (f"merged from {len(parts)} parts with `python benchmarks/reproduce/"
               "heldout_report.py --merge PART.json ...`")  # fmt: skip
    else:
        how = (
            "summarised with `python benchmarks/reproduce/heldout_report.py RUN_DIR --command ...`"
        )
    lines = [
        f"# {label} on the {HALF_NAMES[half]} of the traces, {gpu.upper()}{cut}",
        "",
        f"`{summary['command']}`; {how}.",
        f"Split: {summary['split']}. Speedups are eager over the backend (> 1: faster).",
        "",
    ]
    if parts:
        lines += ["| part | tests | whole | command |", "| --- | --- | --- | --- |"]
        lines += [f"| {Path(p['file']).name} | {p['tests']} | "
                  f"{'no (cut short)' if p['partial'] else 'yes'} | `{p['command']}` |"
                  for p in parts]  # fmt: skip
        lines.append("")
    lines += [
        f"- tests: {summary['tests']} over {summary['ops']} ops, passed {summary['passed']}",
        f"- device geomean {f(summary['device_geomean'])} (target 1.05); host geomean "
        f"{f(summary['host_geomean'])}; host on the {summary['tests_eager_ge_20us']} tests "
        f"with eager >= 20 us {f(summary['host_geomean_eager_ge_20us'])} (target 0.9); "
        f"on the {summary['tests_eager_device_ge_20us']} whose eager device time is >= 20 us "
        f"{f(summary['host_geomean_eager_device_ge_20us'])}",
        "- of those, launched by the C++ gate: "
        + _route_line(summary["host_by_route_eager_ge_20us"]["native"])
        + "; replayed by the gate from the Python path's launches: "
        + _route_line(summary["host_by_route_eager_ge_20us"]["replay"])
        + "; as Python functions: "
        + _route_line(summary["host_by_route_eager_ge_20us"]["python"]),
        f"- mm/addmm/bmm >= 1 GFLOP: {summary['matmul_ge_1gflop']['tests']} tests, geomean "
        f"{f(summary['matmul_ge_1gflop']['device_geomean'])}, lowest "
        f"{f(summary['matmul_ge_1gflop']['min'])} (target 0.9 each)",
        "- convolution forward "
        + f(summary["conv"][CONVS[0]])
        + ", backward "
        + f(summary["conv"][CONVS[1]])
        + " (target 0.8)",
        "",
        "| op | tests | device | host |",
        "| --- | --- | --- | --- |",
    ]
    for op, d in summary["per_op"].items():
        lines.append(f"| {op} | {d['tests']} | {f(d['device'])} | {f(d['host'])} |")
    low = lowest_host(timed_rows(rows))
    if low:
        lines += ["", "Lowest host ratios where eager takes >= 20 us (eager's host us a call; "
                  "`python`: called as the Python function, with the worker's reason where "
                  "the kernel declares a native launch):", "",
                  "| op | args | eager host us | host | device | route |",
                  "| --- | --- | --- | --- | --- | --- |", *low]  # fmt: skip
    if summary["not_passed"]:
        lines += ["", "Not passed:", ""]
        lines += [f"- {r['op']} {r['args']}: {r['status']}, {r['category']}: {r['message']}"
                  for r in summary["not_passed"]]  # fmt: skip
    return lines


def report_json(summary: dict[str, Any]) -> str:
    """``summary`` as JSON, its ``rows`` one line a test (a report of every held-out row
    holds thousands: one line each keeps the file diffable and a tenth the lines)."""
    head = json.dumps({k: v for k, v in summary.items() if k != "rows"}, indent=1)
    rows = ",\n".join("  " + json.dumps(r) for r in summary.get("rows", []))
    return head[: head.rindex("}")].rstrip() + ',\n "rows": [\n' + rows + "\n ]\n}\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run_dir", nargs="?", help="a judged run directory (or use --merge)")
    p.add_argument("--merge", nargs="+", metavar="PART.json", default=None,
                   help="reports of this script over parts of one run (opbench run --shard "
                   "K/N), merged into one")  # fmt: skip
    p.add_argument("--command", help="the opbench run command that made it (a run directory)")
    p.add_argument("--gpu", default="h100")
    p.add_argument("--partial", action="store_true", help="the run was stopped early")
    p.add_argument("--name", default="", help="a suffix for the files (a run of some ops)")
    p.add_argument("--label", default="Triton backend", help="what was judged, for the title")
    p.add_argument("--out-dir", default=str(REPO / "benchmarks" / "results"))
    p.add_argument("--half", choices=sorted(HALF_NAMES), default="heldout",
                   help="the half of the traces the run judged (--trace-split): the tuning "
                   "half's report goes beside the held-out one, named triton-tuning-...")  # fmt: skip
    ns = p.parse_args()
    if (ns.run_dir is None) == (ns.merge is None):
        p.error("give a run directory or --merge PART.json ..., not both")
    parts = None
    if ns.merge:
        rows, parts = merged_rows([Path(m) for m in ns.merge])
        other = [x["file"] for x in parts if x["split"] != split_line(ns.half)]
        if other:
            p.error(f"not of the {HALF_NAMES[ns.half]} (--half {ns.half}): {', '.join(other)}")
        partial = ns.partial or any(x["partial"] for x in parts)
        command = ns.command or " + ".join(str(x["command"]) for x in parts)
    else:
        if not ns.command:
            p.error("--command is required with a run directory")
        rows, partial, command = store_rows(Path(ns.run_dir)), ns.partial, ns.command
    summary = summarize(rows, command, partial, ns.half)
    if parts:
        summary["parts"] = parts
    lines = markdown(summary, rows, ns.label, ns.gpu, ns.half, parts)
    summary["rows"] = [{k: v for k, v in r.items() if v not in (None, "")} for r in rows]
    name = f"-{ns.name}" if ns.name else ""
    stem = f"triton-{ns.half}-{ns.gpu}{name}{'-partial' if partial else ''}"
    out = Path(ns.out_dir)
    (out / f"{stem}.json").write_text(report_json(summary))
    (out / f"{stem}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:12]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
