"""Candidates per second through ``opbench.Scorer``: one operator, a correct numpy
kernel scored N times (each score writes the source, scans it, forks a fresh worker that
imports it, runs every test of the suite for the op and judges it).

Usage: python benchmarks/scorer_throughput.py [--device cpu] [--suite smoke] [--n 20]
Writes benchmarks/results/scorer-throughput-<device>-<suite>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import torch

import opbench

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
KERNEL = """
import numpy as np
import torch


def relu__default_kernel_impl(self):
    a = self.detach().cpu().numpy()
    return torch.from_numpy(np.asarray(np.maximum(a, 0), dtype=a.dtype)).to(self.device)
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--suite", default="smoke")
    p.add_argument("--dtypes", default=None)
    p.add_argument("--n", type=int, default=20)
    a = p.parse_args()
    t0 = time.perf_counter()
    dtypes = a.dtypes.split(",") if a.dtypes else None
    with opbench.Scorer(device=a.device, suite=a.suite, dtypes=dtypes) as s:
        started = time.perf_counter() - t0
        t1 = time.perf_counter()
        first = s.score(KERNEL, "relu.default")
        first_s = time.perf_counter() - t1
        t2 = time.perf_counter()
        for _ in range(a.n):
            v = s.score(KERNEL, "relu.default")
            assert v.correct, v
        steady = time.perf_counter() - t2
    out = {
        "command": f"python benchmarks/scorer_throughput.py --device {a.device} --suite {a.suite}"
        + (f" --dtypes {a.dtypes}" if a.dtypes else "")
        + f" --n {a.n}",
        "device": torch.cuda.get_device_name()
        if a.device.startswith("cuda")
        else platform.processor() or "cpu",
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "tests_per_candidate": first.tests,
        "scorer_start_s": round(started, 2),
        "first_score_s (builds the cases, starts the template)": round(first_s, 2),
        "candidates_per_s": round(a.n / steady, 2),
        "ms_per_candidate": round(steady / a.n * 1e3, 1),
    }
    print(json.dumps(out, indent=1))
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = f"scorer-throughput-{a.device.split(':')[0]}-{a.suite.split(':')[0]}.json"
    (RESULTS / name).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
