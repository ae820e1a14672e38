"""How long a run takes to its first result where Python compiles from source, and with
the harness's bytecode cache (:mod:`opbench.run.bytecode_cache`).

The lent GPU machine sets ``PYTHONDONTWRITEBYTECODE=1`` and its PyTorch has no compiled
bytecode: every process compiled what it imported (the OpInfo database: 13.6-15.2 s a
process, 2026-11-28). This probe makes that machine on any other: *no bytecode* runs with
an empty ``PYTHONPYCACHEPREFIX`` and writing off, so every process compiles from source;
*cache* runs with ``OPBENCH_BYTECODE_CACHE=always`` in a fresh opbench cache folder (the
OpInfo mapping copied in), first writing the cache, then reading it.

Usage: python benchmarks/probes/bytecode_start.py [--device cpu] [--repeats 2]
           [--ops abs.default,add.Tensor,mul.Tensor,sum.default] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks" / "common"))
from run_results import timed_run  # noqa: E402


def _run(env: dict[str, str], args: list[str], out: Path) -> dict[str, Any]:
    wall, timing = timed_run(env, args, out)
    starts = timing.get("slots_start") or [{}]
    return {
        "wall_s": round(wall, 2),
        "build_suite_s": timing["build_suite"],
        "run_s": timing["run"],
        "first_result_s": max(s.get("result_s", 0) for s in starts),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--ops", default="abs.default,add.Tensor,mul.Tensor,sum.default")
    ap.add_argument("--out", help="write the results here as JSON")
    ns = ap.parse_args()
    args = ["--suite", "opinfo", "--device", ns.device, "--dtypes", "f32", "--no-perf",
            "--workers", "1", "--ops", ns.ops]  # fmt: skip
    from opbench.cache import cache_dir

    # not under /tmp: a sandboxed worker's /tmp is its own, so the fork server's template
    # (sandboxed with its workers) would not see a cache there
    work = Path(tempfile.mkdtemp(prefix="opbench-bytecode-", dir=Path.home()))
    base = {**os.environ, "PYTHONPATH": str(REPO / "src"), "OPBENCH_PLAN_IN": "process"}
    base.pop("PYTHONPYCACHEPREFIX", None)
    rows: list[dict[str, Any]] = []
    try:
        empty = work / "no-bytecode"
        empty.mkdir()
        cold = {**base, "OPBENCH_BYTECODE_CACHE": "off", "PYTHONDONTWRITEBYTECODE": "1",
                "PYTHONPYCACHEPREFIX": str(empty)}  # fmt: skip
        cache = work / "cache"
        cache.mkdir()
        for f in cache_dir().glob("opinfo-*.json"):  # the suite's mapping: built once
            shutil.copy(f, cache)
        cached = {**base, "OPBENCH_BYTECODE_CACHE": "always", "OPBENCH_CACHE_DIR": str(cache),
                  "PYTHONDONTWRITEBYTECODE": "1"}  # fmt: skip
        if not any(cache.glob("opinfo-*.json")):
            cold["OPBENCH_CACHE_DIR"] = str(cache)  # both build the mapping the same way
        plan = [("no bytecode", cold)] * ns.repeats + [("cache: first run", cached)]
        plan += [("cache: later run", cached)] * ns.repeats
        for i, (mode, env) in enumerate(plan):
            row = {"mode": mode, **_run(env, args, work / f"run-{i}")}
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.node()} ({os.cpu_count()} cores), Python {platform.python_version()}",
        "command": "python " + " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
        "runs": rows,
    }
    if ns.out:
        Path(ns.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
