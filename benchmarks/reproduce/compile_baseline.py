"""``torch.compile`` (Inductor, default mode) as the second baseline, on the cases a run judged.

Issue 13 asks for the baseline a user would pick after eager beside every speedup. For
each passed test of finished runs (their ``results.sqlite``), the case is rebuilt from
its stored description, and eager PyTorch and ``torch.compile`` of the operator alone
are timed against each other with opbench's own protocol
(:func:`opbench.instrument.timing.time_pair`: CUDA events with L2 flushed, the same
repetitions and host rounds). Both sides are PyTorch's own code, never a candidate's, so
they run in this process. The compiled function is specialised to the case
(``dynamic=False``, as a model compiled at fixed shapes is) and called once before any
timing: Inductor's compile never lands in a timed call.

Per test: ``compile_vs_eager`` (device and host, > 1: compiled is faster), and with the
run's own ours-vs-eager speedup, ``ours_vs_compile = ours_vs_eager / compile_vs_eager``:
both ratios are against eager timed by the same protocol, in two processes. Every test
is appended to ``--journal`` as it finishes and a rerun skips what is there, so a device
call's 10-minute limit cuts nothing finished.

Usage (GPU machine, after ``source benchmarks/common/gpu_env.sh``; the runs of
``benchmarks/reproduce/triton_backend.py``):
    python3 benchmarks/reproduce/compile_baseline.py --run /tmp/triton_backend_runs/triton \\
        --run /tmp/triton_backend_runs/part2 --journal .gpu_data/runs/compile.jsonl \\
        --budget 400 --out benchmarks/results/triton-part2-compile-h100

Committed result: ``benchmarks/results/triton-part2-compile-h100.md`` and ``.json``
(2026-11-25, H100), from the part-2 run of ``triton_backend.py``:
    python3 benchmarks/reproduce/compile_baseline.py --run PART2_RUN_DIR \
        --journal .gpu_data/runs/compile.jsonl --out benchmarks/results/triton-part2-compile-h100
"""

from __future__ import annotations

import argparse
import json
import math
import sqlite3
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def passed_tests(run_dir: Path) -> list[dict[str, Any]]:
    """The run's passed tests with a device speedup: test id, op, stored case, speedups."""
    db = run_dir / "results.sqlite"
    if not db.exists():
        raise SystemExit(f"{db}: no result store (is {run_dir} a finished opbench run?)")
    con = sqlite3.connect(db)
    rows = [
        {
            "run": str(run_dir),
            "test_id": t,
            "op": op,
            "case": json.loads(c),
            "ours_vs_eager": sp,
            "ours_vs_eager_host": sph,
        }  # fmt: skip
        for t, op, c, sp, sph in con.execute(
            "select test_id, op, case_json, speedup, speedup_host from results "
            "where status = 'passed' and speedup is not null and case_json is not null"
        )
    ]
    con.close()
    return rows


def time_compiled(case_dict: dict[str, Any], device: str, backend: str) -> dict[str, Any]:
    """Eager against ``torch.compile`` of the case's operator, by opbench's protocol."""
    import torch

    from opbench.instrument.timing import time_pair
    from opbench.spec.ops import get_overload
    from opbench.suites.case import Case
    from opbench.suites.materialize import materialize

    case = Case.from_dict(case_dict)
    overload = get_overload(case.op)

    def eager(*args: Any, **kwargs: Any) -> Any:
        return overload(*args, **kwargs)

    torch._dynamo.reset()
    compiled = torch.compile(
        lambda *a, **k: overload(*a, **k), backend=backend, dynamic=False, fullgraph=True
    )
    started = time.perf_counter()
    args, kwargs = materialize(case, device)
    compiled(*args, **kwargs)  # compile outside any timed call
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()
    compile_s = time.perf_counter() - started
    t = time_pair(eager, compiled, lambda: materialize(case, device), device)
    torch._dynamo.reset()
    return {
        "compile_vs_eager": t.speedup_device,
        "compile_vs_eager_host": t.speedup_host,
        "eager_ms": t.ref_device_ms,
        "compiled_ms": t.cand_device_ms,
        "compile_s": round(compile_s, 2),
    }


def _journal(path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """Timed tests so far, by (run directory, test id)."""
    from opbench.run.journal import read_records

    try:
        return read_records(path, "compile-baseline", lambda r: (r["run"], r["test_id"]))
    except ValueError as e:
        raise SystemExit(str(e)) from None


def run(runs: list[Path], journal: Path, device: str, backend: str, budget_s: float) -> None:
    from opbench.run.journal import append_record

    journal.parent.mkdir(parents=True, exist_ok=True)
    done = _journal(journal)
    todo = [t for r in runs for t in passed_tests(r) if (t["run"], t["test_id"]) not in done]
    started = time.monotonic()
    for i, t in enumerate(todo, 1):
        if time.monotonic() - started > budget_s:
            print(f"budget spent: {i - 1} of {len(todo)} tests timed", flush=True)
            return
        rec = {k: v for k, v in t.items() if k != "case"}
        try:
            rec.update(time_compiled(t["case"], device, backend))
        except Exception as e:  # an op Inductor cannot compile is recorded, not fatal
            first = str(e).splitlines()[0][:300] if str(e) else ""
            rec["error"] = f"{type(e).__name__}: {first}"
        append_record(journal, rec)
        print(f"[{time.monotonic() - started:5.0f}s] {i}/{len(todo)} {t['op']} "
              f"{rec.get('compile_vs_eager', rec.get('error'))}", flush=True)  # fmt: skip


def _gm(values: list[float]) -> float | None:
    """The report's geomean over the usable ratios (a missing or non-finite one has no
    log), rounded for the table."""
    from opbench.report.metrics import geomean

    g = geomean(x for x in values if x and x > 0 and math.isfinite(x))
    return None if g is None else round(g, 3)


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per op and overall: geomeans of ours/eager, compiled/eager and ours/compiled over
    the tests both were timed on; the tests Inductor could not compile, with why."""
    by_op: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_op[r["op"]].append(r)

    def stats(rs: list[dict[str, Any]]) -> dict[str, Any]:
        ok = [r for r in rs if "error" not in r and r.get("compile_vs_eager")]
        return {
            "tests": len(rs),
            "timed": len(ok),
            "ours_vs_eager": _gm([r["ours_vs_eager"] for r in ok]),
            "compile_vs_eager": _gm([r["compile_vs_eager"] for r in ok]),
            "ours_vs_compile": _gm([r["ours_vs_eager"] / r["compile_vs_eager"] for r in ok]),
            "ours_vs_compile_host": _gm(
                [
                    r["ours_vs_eager_host"] / r["compile_vs_eager_host"]
                    for r in ok
                    if r.get("ours_vs_eager_host") and r.get("compile_vs_eager_host")
                ]
            ),  # fmt: skip
            "errors": sorted({r["error"] for r in rs if "error" in r}),
        }

    return {"overall": stats(rows), "per_op": {op: stats(rs) for op, rs in sorted(by_op.items())}}


def render(summary: dict[str, Any], env: dict[str, Any], command: str, backend: str) -> list[str]:
    return [
        f"# torch.compile as the second baseline on {env.get('gpu')}",
        "",
        f"torch {env.get('torch')}, triton {env.get('triton')}; `{command}`. Eager and "
        f"`torch.compile(backend={backend!r})` (default mode, the operator alone, compiled "
        "before timing) timed "
        "against each other by opbench's protocol; `ours vs eager` from the run itself. "
        "Geomeans over the tests both were timed on; above 1 is faster.",
        "",
        *table(summary),
    ]


def table(summary: dict[str, Any]) -> list[str]:
    """The overall line and the per-op table of a summary (also in the part-2 report of
    ``benchmarks/reproduce/triton_backend.py``)."""
    o = summary["overall"]
    lines = [
        f"Overall: ours vs eager {o['ours_vs_eager']}, compiled vs eager "
        f"{o['compile_vs_eager']}, **ours vs compiled {o['ours_vs_compile']}** (device), "
        f"{o['ours_vs_compile_host']} (host), over {o['timed']} of {o['tests']} tests.",
        "",
        "| op | tests timed | ours vs eager | compiled vs eager | ours vs compiled | host: ours vs compiled | not compiled |",
        "|---|---|---|---|---|---|---|",
    ]
    for op, s in summary["per_op"].items():
        lines.append(
            f"| {op} | {s['timed']}/{s['tests']} | {s['ours_vs_eager']} | "
            f"{s['compile_vs_eager']} | {s['ours_vs_compile']} | {s['ours_vs_compile_host']} | "
            f"{'; '.join(s['errors'])[:200]} |"
        )
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", action="append", required=True, help="a finished run directory")
    ap.add_argument("--journal", required=True, help="JSONL of timed tests (resumable)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--compile-backend", default="inductor")
    ap.add_argument("--budget", type=float, default=400, help="start no test after this (s)")
    ap.add_argument("--report", action="store_true", help="only summarize the journal")
    ap.add_argument("--out", help="OUT.json and OUT.md")
    a = ap.parse_args()
    journal = Path(a.journal)
    if not a.report:
        run([Path(r) for r in a.run], journal, a.device, a.compile_backend, a.budget)
    summary = summarize(list(_journal(journal).values()))
    print(json.dumps(summary["overall"]))
    if a.out:
        from opbench.run.machine import environment

        env = environment(a.device)
        command = " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])
        out = Path(a.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        doc = {"env": env, "command": command, **summary}
        out.with_suffix(".json").write_text(json.dumps(doc, indent=1, default=str) + "\n")
        out.with_suffix(".md").write_text(
            "\n".join(render(summary, env, command, a.compile_backend)) + "\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
