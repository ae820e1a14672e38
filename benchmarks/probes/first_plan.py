"""When a run's slots get their first plan, with the judging processes started at the
run (as before 2026-11-28) or while the suite is built (``LocalExecutor.prestart``).

Each run is ``opbench run --suite opinfo --backend aten --no-perf`` with
``OPBENCH_PLAN_IN=process`` (the GPU's default, forced on the CPU), from each source tree
given (``--src LABEL=DIR``: an older checkout's ``src`` against this one's), in turn, so
both meet the same machine state; the summary's ``timing_s`` gives the suite's build, each
slot's first plan and first result (seconds from the run phase's start) and the wall time.

Usage: python benchmarks/probes/first_plan.py --src before=/tmp/before/src \\
           --src after=src [--device cpu] [--repeats 3] [--workers 1] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks" / "common"))
from run_results import timed_run  # noqa: E402


def _run(src: Path, args: list[str], out: Path) -> dict[str, Any]:
    env = {**os.environ, "OPBENCH_PLAN_IN": "process", "PYTHONPATH": str(src.resolve())}
    wall, timing = timed_run(env, args, out)
    first = (timing.get("slots_start") or [{}])[0]
    return {"wall_s": round(wall, 2), "build_s": timing.get("build_suite"),
            "run_s": timing.get("run"), "plan_s": first.get("plan_s"),
            "result_s": first.get("result_s")}  # fmt: skip


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--src", action="append", required=True, metavar="LABEL=DIR")
    p.add_argument("--device", default="cpu")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--ops", default="abs.default,add.Tensor,mul.Tensor")
    p.add_argument("--out", default=None)
    ns = p.parse_args()
    trees = dict(s.split("=", 1) for s in ns.src)
    args = ["--suite", "opinfo", "--backend", "aten", "--device", ns.device, "--no-perf",
            "--dtypes", "f32", "--ops", ns.ops, "--workers", str(ns.workers)]  # fmt: skip
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label in trees}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(ns.repeats):
            for label, src in trees.items():
                got = _run(Path(src), args, Path(tmp) / f"{label}-{i}")
                runs[label].append(got)
                print(label, i, got, flush=True)
    medians = {
        label: {k: statistics.median(r[k] for r in rs) for k in rs[0] if rs[0][k] is not None}
        for label, rs in runs.items()
    }
    result = {"date": time.strftime("%Y-%m-%d"), "machine": f"{platform.machine()}, "
              f"{os.cpu_count()} cores", "command": "python benchmarks/probes/first_plan.py "
              + " ".join(sys.argv[1:]), "runs": runs, "medians": medians}  # fmt: skip
    print(json.dumps(medians, indent=1))
    if ns.out:
        Path(ns.out).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
