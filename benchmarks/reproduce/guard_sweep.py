"""Every traced row of every op the reference Triton backend serves, through the judge's
guard on the CPU machine with its kernel launches stubbed: which rows make an ATen call
the guard counts as delegated compute (``calls_pytorch``).

Why: a held-out 3x3 convolution's input gradient packed its weight with ``torch.flip``
and failed the judge on an H200 (2026-11-29); the judged runs had read the 2 most used
rows of each op, and the kernel tests compared values only. Which ATen calls a kernel
makes is decided by its Python (paths, plans, views, allocations), not by what its
Triton kernels compute, so every row can be swept here in minutes: each case is built
on CPU tensors, our kernel called with every ``Launcher`` call a no-op (the Python
around the launches runs, nothing is computed) under the worker's own dispatch
recorder, and the calls classified by the guard (``judge.guard.classify_calls``).

What it does not see: paths taken only on a GPU (the TMA matmuls, ``is_cuda`` checks),
and calls made inside Triton kernels launched outside a ``Launcher``. A row whose Python
raises on the CPU (a device check, a value read from a stubbed output) is listed as
such, not judged.

Usage (any machine):
    python benchmarks/reproduce/guard_sweep.py --traces ../shared/traces --split heldout \
        --out benchmarks/results/guard-sweep-heldout.json
    # a sweep stopped early: report the rows its journal kept (reads no traces)
    python benchmarks/reproduce/guard_sweep.py --stopped --split heldout \
        --out benchmarks/results/guard-sweep-heldout.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks" / "reproduce"))
sys.path.insert(0, str(REPO / "src"))

#: The served ops beside the elementwise and reduction families (``triton_backend.COVERED``).
PART2 = "mm,bmm,addmm,baddbmm,convolution,convolution_backward"


def sweep(traces: str, ops_csv: str, split: str | None, limit: int,
          journal: Path | None = None) -> dict[str, Any]:  # fmt: skip
    """``{"rows": [...], "summary": {...}}``: one row per traced case of a served op, each
    also appended to ``journal`` (JSON lines) as it is made, so a sweep stopped early
    keeps what it found; a row taking over 10 s is named on stderr."""
    import torch
    from host_profile import _stub_launches, served_cases

    from opbench.instrument.observer import DispatchRecorder
    from opbench.judge.guard import classify_calls
    from opbench.spec.call import targets
    from opbench.suites.inputs import NotRunnable
    from opbench.suites.materialize import materialize

    _stub_launches()
    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    last_op = None
    for op, i, case, ref, cand in served_cases(traces, ops_csv, limit, "cpu", split):
        if op != last_op:
            print(f"[{time.perf_counter() - t0:7.1f} s] {op}", file=sys.stderr, flush=True)
            last_op = op
        row: dict[str, Any] = {"op": op, "index": i, "args": case.args}
        started = time.perf_counter()
        try:
            args, kwargs = materialize(case, "cpu")
        except NotRunnable as e:
            rows.append({**row, "status": "not_runnable", "message": str(e.reason)})
            continue
        recorder = DispatchRecorder(
            [t for t in targets(ref, list(args), kwargs) if isinstance(t, torch.Tensor)]
        )
        try:
            with recorder:
                cand(*args, **kwargs)
        except NotImplementedError as e:
            row.update(status="not_implemented", message=str(e)[:300])
        except Exception as e:  # the kernel's Python on CPU tensors: recorded, not judged
            row.update(status="raised", message=f"{type(e).__name__}: {str(e)[:300]}")
        else:
            verdict = classify_calls(op, recorder.calls)
            row.update(status="calls_pytorch" if verdict.violations else "clean",
                       violations=verdict.violations)  # fmt: skip
        row["seconds"] = round(time.perf_counter() - started, 2)
        if row["seconds"] > 10:
            print(f"  {row['seconds']} s: {case.args[:150]}", file=sys.stderr, flush=True)
        rows.append(row)
        if journal is not None:
            with journal.open("a") as f:
                f.write(json.dumps(row) + "\n")
    counts = Counter(r["status"] for r in rows)
    return {
        "split": split or "all",
        "ops": ops_csv,
        "torch": torch.__version__,
        "seconds": round(time.perf_counter() - t0, 1),
        "summary": dict(sorted(counts.items())),
        "rows": rows,
    }


def markdown(result: dict[str, Any], command: str) -> str:
    """The sweep as a short report: counts, then every row that is not clean."""
    lines = [
        f"# Guard sweep of the reference backend, {result['split']} rows",
        "",
        f"`{command}` (CPU, launches stubbed, torch {result['torch']}, "
        f"{result['seconds']} s). Statuses: "
        + ", ".join(f"{k} {v}" for k, v in result["summary"].items()),
        "",
    ]
    bad = [r for r in result["rows"] if r["status"] != "clean"]
    if bad:
        lines += ["| op | args | status | detail |", "| --- | --- | --- | --- |"]
        for r in bad:
            detail = r.get("violations") or r.get("message", "")
            lines.append(f"| {r['op']} | `{r['args'][:120]}` | {r['status']} | {detail} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    from triton_backend import COVERED

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--traces", help="the traces folder (required unless --stopped)")
    p.add_argument("--split", choices=["tuning", "heldout", "all"], default="heldout")
    p.add_argument("--ops", default=f"{COVERED},{PART2}")
    p.add_argument("--limit", type=int, default=10**9, help="rows per op, most used first")
    p.add_argument(
        "--out",
        required=True,
        help="a .json path; the .md is written beside it "
        "(and, while it runs, each row to a .jsonl beside it)",
    )
    p.add_argument(
        "--stopped",
        action="store_true",
        help="report the .jsonl that a sweep stopped early left beside --out",
    )
    ns = p.parse_args()
    if not ns.stopped and ns.traces is None:
        p.error("--traces is required to sweep (--stopped reads only the journal)")
    out = Path(ns.out)
    journal = out.with_suffix(".jsonl")
    if ns.stopped:
        import torch

        rows = [json.loads(line) for line in journal.read_text().splitlines()]
        result = {"split": f"{ns.split}, of a sweep stopped early with {len(rows)}", "ops": ns.ops,
                  "torch": torch.__version__, "seconds": round(sum(r["seconds"] for r in rows)),
                  "summary": dict(sorted(Counter(r["status"] for r in rows).items())),
                  "rows": rows}  # fmt: skip
    else:
        journal.unlink(missing_ok=True)
        split = None if ns.split == "all" else ns.split
        result = sweep(ns.traces, ns.ops, split, ns.limit, journal)
    journal.unlink()
    # counts per op and status, and the rows that are not clean (every row: thousands)
    per_op = Counter((r["op"], r["status"]) for r in result["rows"])
    kept = {**result, "per_op": {f"{op} {st}": n for (op, st), n in sorted(per_op.items())},
            "rows": [r for r in result["rows"] if r["status"] != "clean"]}  # fmt: skip
    out.write_text(json.dumps(kept, indent=1) + "\n")
    command = "python benchmarks/reproduce/guard_sweep.py " + " ".join(sys.argv[1:])
    out.with_suffix(".md").write_text(markdown(result, command))
    print(markdown(result, command)[:3000])
    return 1 if result["summary"].get("calls_pytorch") else 0


if __name__ == "__main__":
    sys.exit(main())
