"""Why a product served by the shape rule (``matmul_ruled_into``) can time slower than the
same candidate launched directly: each side timed on one product in one process
(``do_bench``, L2 cleared), beside its host time per call (1,000 calls, no sync) and the
ranking the rule computes there.

What it found (H200, 2026-11-29): the kernels' device time is the same either way
(``_tma_mm_kernel`` 7.1 us on ``addmm 2048x768x768``), the host path is 23-56 us a call
on both, and ``do_bench`` read the same kernel at 9-11 us in one run and 20-34 us in
another: its events take in the host's launch where that outlasts the L2 flush. The
tuners' sweeps time device work since (``matmul_timing.device_bench``).

Usage (GPU machine, after ``source benchmarks/common/gpu_env.sh``):
    python3 benchmarks/probes/matmul_rule_probe.py --sweep served.jsonl \
        --match "addmm 1 2048 768 768" --match "bmm 256 256 64 256"
``--sweep``: a ``matmul_paths.py`` sweep whose products to probe (``--match`` picks them by
``op batch M N K``, e.g. ``addmm 1 1154 768 768``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks" / "tune"))
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks" / "common"))
from kernel_times import kernel_times_us  # noqa: E402


def kernel_us(fn) -> list:
    """[name, device µs per call] of the kernels 20 calls launch (torch.profiler)."""
    return [[n, round(v, 2)] for n, v in kernel_times_us(fn, 20, warmup=0).items()]


def main() -> int:
    import matmul_paths as mp
    import torch
    import triton

    from opbench.kernels._lib import matmul, matmul_rule

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sweep", required=True)
    ap.add_argument("--match", action="append", required=True, help="op batch M N K")
    opt = ap.parse_args()
    wanted = [m.split() for m in opt.match]
    rows = [json.loads(line) for line in open(opt.sweep)]
    for r in rows:
        key = [r["op"].split(".")[0], str(r["batch"]), str(r["M"]), str(r["N"]), str(r["K"])]
        if key not in wanted:
            continue
        wanted.remove(key)
        _, _, ops = mp._setup(r, "cuda")
        a, b = ops[1], ops[2]
        cls = matmul_rule.layout_class(a, b)
        first = matmul_rule.ranked(cls, r["M"], r["N"], r["K"], r["batch"])[0]
        fns = {
            "direct": lambda first=first, ops=ops: mp.run_candidate(first[0], first[1], ops),
            "ruled": lambda ops=ops: matmul.matmul_ruled_into(*ops),
        }
        out = {"product": key, "class": cls, "first": first}
        for name, fn in fns.items():
            fn()
            torch.cuda.synchronize()
            out[name + "_us"] = round(triton.testing.do_bench(fn, warmup=5, rep=30) * 1e3, 1)
            t = time.perf_counter()
            for _ in range(1000):
                fn()
            out[name + "_host_us"] = round((time.perf_counter() - t) * 1e3, 1)
            torch.cuda.synchronize()
            out[name + "_kernels_us"] = kernel_us(fn)
        print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
