"""Two backends judged on the same held-out rows, op by op: where each passes, who is ahead.

Reads two summaries written by ``heldout_report.py`` (their ``per_op`` and ``not_passed``)
for runs of the same command but ``--backend`` (``benchmarks/gpu/heldout_run.sh`` and
``BACKEND=module:flag_gems:enable bash benchmarks/gpu/heldout_run.sh``), and writes a
table of the ops both pass (every test of the op passed in both runs: an op one of them
fails is listed apart, with the first failure's reason) with each side's device and host
geomean over eager, and the ops where the second is ahead on either. Speedups against
eager are compared, each measured in its own run against eager in that run; both runs
must cover the same tests (the script refuses otherwise). A lead named here rests on one
run a side, often from two lends: the table gives the command that judges those ops again
in turns on one machine (``benchmarks/gpu/alternate_run.sh``, read by ``alternate_report.py``).

Usage: python benchmarks/reproduce/heldout_versus.py OURS.json THEIRS.json
    --names triton,flag_gems --out benchmarks/results/NAME (writes NAME.md and NAME.json)

Committed: ``heldout-versus-flag_gems-h200.md``/``.json`` (2026-11-30: the Triton backend
at dde9349 against FlagGems 5.0.2 at 38b5a4a's command, H200, the held-out half, 2 rows an op).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from opbench.report.means import geomean_of_timed


def _failures(summary: dict[str, Any]) -> dict[str, str]:
    """op -> the first not-passed test's status and reason."""
    out: dict[str, str] = {}
    for r in summary.get("not_passed") or []:
        out.setdefault(r["op"], f"{r['category']}: {(r.get('message') or '')[:120]}")
    return out


def compare(ours: dict[str, Any], theirs: dict[str, Any]) -> dict[str, Any]:
    if ours.get("tests") != theirs.get("tests"):
        raise SystemExit(
            f"the runs hold {ours.get('tests')} and {theirs.get('tests')} tests: not the same rows"
        )
    fail_a, fail_b = _failures(ours), _failures(theirs)
    ops = sorted(set(ours["per_op"]) | set(theirs["per_op"]) | set(fail_a) | set(fail_b))
    both, only = [], []
    for op in ops:
        a, b = ours["per_op"].get(op), theirs["per_op"].get(op)
        if a and b and op not in fail_a and op not in fail_b:
            both.append(
                {
                    "op": op,
                    "tests": a["tests"],
                    "device": [a["device"], b["device"]],
                    "host": [a["host"], b["host"]],
                    "theirs_ahead": [k for k in ("device", "host") if (b[k] or 0) > (a[k] or 0)],
                }
            )
        else:
            only.append(
                {"op": op, "ours": fail_a.get(op, "passed"), "theirs": fail_b.get(op, "passed")}
            )
    return {
        "ops_both_pass": len(both),
        "device_geomean": [geomean_of_timed([r["device"][i] for r in both]) for i in (0, 1)],
        "host_geomean": [geomean_of_timed([r["host"][i] for r in both]) for i in (0, 1)],
        "both": both,
        "not_both": only,
    }


def markdown(result: dict[str, Any], ours: dict[str, Any], theirs: dict[str, Any]) -> str:
    """The comparison as a table, the ops the second backend is ahead on named first,
    with the command that judges them again in turns on one machine."""
    a, b = result["names"]

    def f(x: float | None) -> str:
        return "-" if x is None else f"{x:.3f}"

    ahead = [r for r in result["both"] if r["theirs_ahead"]]
    lines = [
        f"# {a} against {b} on the same held-out rows",
        "",
        f"- {a}: `{ours['command']}`",
        f"- {b}: `{theirs['command']}`",
        f"- made with `python benchmarks/reproduce/heldout_versus.py A.json B.json --names {a},{b} --out ...`",
        "",
        f"Speedups over eager, each in its own run (> 1: faster than eager). Ops both pass: "
        f"{result['ops_both_pass']}; over them {a} {f(result['device_geomean'][0])} device / "
        f"{f(result['host_geomean'][0])} host, {b} {f(result['device_geomean'][1])} / "
        f"{f(result['host_geomean'][1])}. {b} is ahead on "
        + (", ".join(f"`{r['op']}` ({' and '.join(r['theirs_ahead'])})" for r in ahead) or "no op")
        + ".",
    ]
    if ahead:
        # one run a side, perhaps from two lends: a lead of a few percent can be the order
        # the runs came in (benchmarks/reproduce/alternate_report.py)
        lines += [
            "",
            "One run a side: to tell a lead from run-to-run noise, judge those ops again in "
            "turns on one machine: `OPS="
            + ",".join(r["op"] for r in ahead)
            + " bash benchmarks/gpu/alternate_run.sh`.",
        ]
    lines += [
        "",
        f"| op | tests | {a} device | {b} device | {a} host | {b} host |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in result["both"]:
        mark = " **" + b + " ahead**" if r["theirs_ahead"] else ""
        lines.append(
            f"| {r['op']}{mark} | {r['tests']} | {f(r['device'][0])} | {f(r['device'][1])} "
            f"| {f(r['host'][0])} | {f(r['host'][1])} |"
        )
    lines += ["", f"Ops not passed by both ({len(result['not_both'])}):", ""]
    lines += [f"- `{r['op']}`: {a} {r['ours']}; {b} {r['theirs']}" for r in result["not_both"]]
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("ours")
    p.add_argument("theirs")
    p.add_argument("--names", default="ours,theirs")
    p.add_argument("--out", required=True, help="path without suffix: .md and .json")
    ns = p.parse_args()
    ours, theirs = (json.loads(Path(x).read_text()) for x in (ns.ours, ns.theirs))
    a, b = ns.names.split(",")
    result = {
        "names": [a, b],
        "commands": [ours["command"], theirs["command"]],
        **compare(ours, theirs),
    }
    text = markdown(result, ours, theirs)
    out = Path(ns.out)
    out.with_suffix(".md").write_text(text)
    out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    print("\n".join(text.splitlines()[:10]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
