"""How fast a large input is drawn on the draw pool's threads (``suites/draw_pool.py``),
by thread count, on this machine's CPUs: the numbers behind ``draw_pool.threads_wanted``.

Each count draws the same tensor (``draw_seeded``: chunks of 32,768 values, each from its
own seed) in a fresh process (the pool is started once a process), best of 3, and checks
the bits against one thread's.

Usage: python3 benchmarks/probes/draw_threads.py [--elements 50000000] [--threads 1,2,4,8]
    [--out draw-threads.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

CHILD = """
import hashlib, sys, time, torch
from opbench.suites import draw_pool
from opbench.suites.input_call import Kind, draw_seeded
n, threads = int(sys.argv[1]), int(sys.argv[2])
draw_pool.start(threads)
best = None
for _ in range(3):
    t = time.perf_counter()
    x = draw_seeded(n, torch.float16, Kind("default"), 1234)
    s = time.perf_counter() - t
    best = s if best is None else min(best, s)
print(best, hashlib.sha256(x.view(torch.int16).numpy().tobytes()).hexdigest())
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--elements", type=int, default=50_000_000)
    ap.add_argument("--threads", default="1,2,4,8,12")
    ap.add_argument("--out")
    ns = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    rows = []
    for t in [int(x) for x in ns.threads.split(",")]:
        out = subprocess.run([sys.executable, "-c", CHILD, str(ns.elements), str(t)],
                             capture_output=True, text=True, env=env, check=True)  # fmt: skip
        seconds, digest = out.stdout.split()
        rows.append({"threads": t, "seconds": round(float(seconds), 4), "sha256": digest})
        print(json.dumps(rows[-1]), flush=True)
    same = len({r["sha256"] for r in rows}) == 1
    result = {"elements": ns.elements, "dtype": "float16", "kind": "default",
              "cpus": len(os.sched_getaffinity(0)), "same_bits": same, "rows": rows}  # fmt: skip
    if ns.out:
        Path(ns.out).write_text(json.dumps(result, indent=1) + "\n")
    print("same bits for every count" if same else "BITS DIFFER between counts")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
