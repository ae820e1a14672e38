"""Candidates per second through ``opbench.Scorer``: one operator, a correct kernel
scored N times (each score writes the source, scans it, forks a fresh worker that imports
it, runs every test of the suite for the op and judges it).

``--kernel numpy`` (default) scores a numpy ``relu``; ``--kernel triton`` scores the
prompts' Triton example (``abs``), what an LLM's Triton answer costs to judge: each
candidate's worker loads the compiled kernel from Triton's on-disk cache after the first.

Usage: python benchmarks/scorer_throughput.py [--device cpu] [--suite smoke] [--n 20]
    [--kernel numpy|triton]
Writes benchmarks/results/scorer-throughput-<device>-<suite>[-triton].json.
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


TEMPLATES = Path(opbench.__file__).with_name("agent") / "templates"

#: kernel name -> (source, the overload it serves)
KERNELS = {
    "numpy": (KERNEL, "relu.default"),
    "triton": ((TEMPLATES / "example_triton.py").read_text(), "abs.default"),
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--suite", default="smoke")
    p.add_argument("--dtypes", default=None)
    p.add_argument("--n", type=int, default=20)
    p.add_argument("--kernel", choices=sorted(KERNELS), default="numpy")
    a = p.parse_args()
    source, op = KERNELS[a.kernel]
    t0 = time.perf_counter()
    dtypes = a.dtypes.split(",") if a.dtypes else None
    with opbench.Scorer(device=a.device, suite=a.suite, dtypes=dtypes) as s:
        started = time.perf_counter() - t0
        t1 = time.perf_counter()
        first = s.score(source, op)
        # the Triton example declines strided inputs (not_implemented): judged all the same
        assert first.passed > 0 and first.failures.keys() <= {"not_implemented"}, first
        first_s = time.perf_counter() - t1
        t2 = time.perf_counter()
        for _ in range(a.n):
            v = s.score(source, op)
            assert (v.passed, v.tests) == (first.passed, first.tests), v
        steady = time.perf_counter() - t2
    out = {
        "command": f"python benchmarks/scorer_throughput.py --device {a.device} --suite {a.suite}"
        + (f" --dtypes {a.dtypes}" if a.dtypes else "")
        + f" --n {a.n}"
        + (f" --kernel {a.kernel}" if a.kernel != "numpy" else ""),
        "kernel": f"{a.kernel} {op}",
        "device": torch.cuda.get_device_name()
        if a.device.startswith("cuda")
        else platform.processor() or "cpu",
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "tests_per_candidate": first.tests,
        "tests_passed": first.passed,
        "scorer_start_s": round(started, 2),
        "first_score_s (builds the cases, starts the template)": round(first_s, 2),
        "candidates_per_s": round(a.n / steady, 2),
        "ms_per_candidate": round(steady / a.n * 1e3, 1),
    }
    print(json.dumps(out, indent=1))
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = f"scorer-throughput-{a.device.split(':')[0]}-{a.suite.split(':')[0]}"
    name += "-triton.json" if a.kernel == "triton" else ".json"
    (RESULTS / name).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
