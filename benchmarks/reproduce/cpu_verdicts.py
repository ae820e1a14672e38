"""Verdicts on the CPU, test by test, of this checkout against another: moves that are
meant to change no behaviour (module splits, merged helpers) must leave every verdict as
it was.

Runs ``opbench run --device cpu --no-perf`` for each suite below with this checkout's
``src`` and, with ``--baseline-src OLD/src``, with the other checkout's, in fresh
processes (``PYTHONPATH`` decides which code runs), and compares the verdicts
(status/category) of the tests both ran:
- ``opinfo-aten``: the OpInfo quick profile, f32, on PyTorch itself;
- ``traces-aten``: the traces suite at ``--limit-per-op 1`` on PyTorch itself;
- ``opinfo-triton``: the OpInfo quick profile, f32, on the reference Triton backend's ops,
  under Triton's interpreter.

Usage: python benchmarks/reproduce/cpu_verdicts.py [--baseline-src OLD/src]
    [--suites opinfo-aten,traces-aten,opinfo-triton] [--traces ../shared/traces]
Writes benchmarks/results/cpu-verdicts.json and .md.

Committed: ``cpu-verdicts.md``/``.json`` (2-core CPU, 2026-11-27; baseline f053ccb, the
tree before the module splits of the maintainability work):
    python benchmarks/reproduce/cpu_verdicts.py --baseline-src .gpu_data/before/src
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def _suite_args(name: str, traces: str, triton_ops: str) -> list[str]:
    if name == "opinfo-aten":
        return ["--suite", "opinfo", "--profile", "quick", "--dtypes", "f32", "--backend", "aten"]
    if name == "traces-aten":
        return ["--suite", "traces", "--traces", traces, "--limit-per-op", "1", "--backend", "aten"]
    if name == "opinfo-triton":
        return ["--suite", "opinfo", "--profile", "quick", "--dtypes", "f32",
                "--backend", "triton", "--ops", triton_ops]  # fmt: skip
    raise SystemExit(f"unknown suite {name!r}")


def _triton_ops() -> str:
    os.environ.setdefault("TRITON_INTERPRET", "1")
    from opbench.backends.loader import load_backend

    return ",".join(sorted(load_backend("triton", "cpu").served_ops()))


def _run(src: Path, args: list[str], out: Path, budget: float) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(src), TRITON_INTERPRET="1")
    cmd = [sys.executable, "-m", "opbench.cli", "run", *args, "--device", "cpu", "--no-perf",
           "--workers", "2", "--quiet", "--out", str(out)]  # fmt: skip
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=budget)
        rc: Any = p.returncode
        tail = (p.stdout + p.stderr)[-800:]
    except subprocess.TimeoutExpired:
        rc, tail = "timeout", ""
    verdicts: dict[str, str] = {}
    db = out / "results.sqlite"
    if db.exists():
        con = sqlite3.connect(db)
        verdicts = {t: f"{s}/{c or '-'}" for t, s, c in
                    con.execute("select test_id, status, category from results")}  # fmt: skip
        con.close()
    return {"rc": rc, "wall_s": round(time.perf_counter() - t0, 1), "verdicts": verdicts,
            **({"tail": tail} if rc not in (0, 1) else {})}  # fmt: skip


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--baseline-src", help="the other checkout's src folder")
    p.add_argument("--suites", default="opinfo-aten,traces-aten,opinfo-triton")
    p.add_argument("--traces", default=str(REPO.parent / "shared" / "traces"))
    p.add_argument("--budget", type=float, default=1800.0, help="seconds per run")
    p.add_argument("--workdir", default="/tmp/opbench-cpu-verdicts")
    p.add_argument("--out-dir", default=str(REPO / "benchmarks" / "results"))
    ns = p.parse_args()
    wd = Path(ns.workdir)
    shutil.rmtree(wd, ignore_errors=True)  # a run directory left from before would be resumed
    triton_ops = _triton_ops() if "opinfo-triton" in ns.suites else ""
    sides = {"this checkout": REPO / "src"}
    if ns.baseline_src:
        sides["baseline"] = Path(ns.baseline_src).resolve()
    suites: dict[str, Any] = {}
    for name in ns.suites.split(","):
        args = _suite_args(name, ns.traces, triton_ops)
        runs = {side: _run(src, args, wd / f"{name}-{i}", ns.budget)
                for i, (side, src) in enumerate(sides.items())}  # fmt: skip
        entry: dict[str, Any] = {"args": args, "runs": {
            side: {k: v for k, v in r.items() if k != "verdicts"} | {"tests": len(r["verdicts"])}
            for side, r in runs.items()}}  # fmt: skip
        mine = runs["this checkout"]["verdicts"]
        entry["verdicts"] = mine
        if "baseline" in runs:
            old = runs["baseline"]["verdicts"]
            both = mine.keys() & old.keys()
            entry["compared"] = len(both)
            entry["differ"] = {t: [old[t], mine[t]] for t in sorted(both) if old[t] != mine[t]}
        suites[name] = entry
        print(name, {s: (r["rc"], r["wall_s"], len(r["verdicts"])) for s, r in runs.items()},
              "differ:", len(entry.get("differ", {})))  # fmt: skip
    out = Path(ns.out_dir)
    path = out / "cpu-verdicts.json"
    if path.exists():  # suites not run now keep their last result
        suites = {**json.loads(path.read_text()), **suites}
    write_report(suites, out, ns.baseline_src)
    return 0


def write_report(suites: dict[str, Any], out: Path, baseline_src: str | None) -> None:
    """``cpu-verdicts.json`` and ``.md`` in ``out`` (the table printed too)."""
    lines = [
        "# CPU verdicts, this checkout against a baseline",
        "",
        f"{time.strftime('%Y-%m-%d')}; `python benchmarks/reproduce/cpu_verdicts.py"
        f"{' --baseline-src ' + baseline_src if baseline_src else ''}`",
        "",
        "| suite | tests here | tests in baseline | compared | verdicts that differ | wall s here, baseline |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, e in suites.items():
        here, old = e["runs"]["this checkout"], e["runs"].get("baseline", {})
        lines.append(f"| {name} | {here['tests']} | {old.get('tests', '-')} | "
                     f"{e.get('compared', '-')} | {len(e['differ']) if 'differ' in e else '-'} | "
                     f"{here['wall_s']}, {old.get('wall_s', '-')} |")  # fmt: skip
    for name, e in suites.items():
        for t, (old, new) in list(e.get("differ", {}).items())[:30]:
            lines.append(f"- {name} `{t}`: {old} -> {new}")
    (out / "cpu-verdicts.json").write_text(json.dumps(suites, indent=1) + "\n")
    (out / "cpu-verdicts.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
