"""Where a fresh worker's first test of a Triton candidate goes: the Scorer on an H100
spent 715 of its 845 ms per candidate inside three small tests (abs, f32), with the
kernel already compiled on disk (``results/scorer-throughput-cuda-opinfo-triton.json``).

Mimics a forked worker's state in a fresh process: torch, opbench and the worker's
modules imported, the CUDA context made, Triton imported but never launched, and a
Triton cache that already holds the candidate's compiled kernel. Then it runs the
candidate's tests as the worker does (``instrument.candidate.run_candidate`` with the
harness's trial plans, in this process: a probe, not a judge) under cProfile, once cold
and once again warm, and prints where the cold round's time went. ``--warm-key`` first
computes Triton's own compiler key (``triton_key()``: a SHA-256 of the 500 MB
``libtriton.so``), as the fork server's template now does for GPU workers.

Usage: python3 benchmarks/probes/first_test_profile.py [--device cuda] [--warm-key]
Open finding: which modules a first launch imports moves with Triton versions (checked on
Triton 3.6 on the H100; 3.9 not yet on a GPU): `run/worker.py: TRITON_FIRST_LAUNCH_IMPORTS`.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import opbench

SOURCE = (Path(opbench.__file__).with_name("agent") / "templates" / "example_triton.py").read_text()
OP = "abs.default"


def _round(device: str, kernels: Path, profile: bool) -> float:
    """Every test of the op once, as a worker runs them; seconds."""
    from dataclasses import replace

    from opbench.backends import loader
    from opbench.instrument.candidate import run_candidate
    from opbench.judge.expectations import plan_trials
    from opbench.run.session import load_suite_cases, select_cases
    from opbench.run.setup import RunRequest
    from opbench.spec.judge_options import JudgeOptions

    opts = JudgeOptions()
    req = RunRequest(suite="opinfo", backend=str(kernels), device=device, dtypes=["f32"])
    cases = select_cases(replace(req, ops=[OP]), load_suite_cases(replace(req, ops=[OP]))).cases
    plans = [plan_trials(c, device, opts)[0] for c in cases]
    prof = cProfile.Profile() if profile else None
    modules_before = set(sys.modules)
    t0 = time.perf_counter()
    if prof:
        prof.enable()
    backend = loader.load_backend(str(kernels), device)
    kernel = backend.kernel_for(OP)
    for case, plan in zip(cases, plans, strict=True):
        run_candidate(case, kernel, device, opts, plan)
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()
    took = time.perf_counter() - t0
    if prof:
        prof.disable()
        out = io.StringIO()
        stats = pstats.Stats(prof, stream=out)
        stats.sort_stats("cumulative").print_stats(45)
        stats.sort_stats("tottime").print_stats(20)
        print(out.getvalue())
        new = sorted(m for m in set(sys.modules) - modules_before if "opbench" not in m)
        tops = sorted({".".join(m.split(".")[:3]) for m in new})
        print(f"modules first imported in this round: {len(new)}: {', '.join(tops)}")
    return took


def child(a: argparse.Namespace) -> None:
    import torch

    import opbench.instrument.candidate  # noqa: F401  (what a worker has imported)
    import opbench.run.worker  # noqa: F401

    if a.device.startswith("cuda"):
        torch.zeros(1, device=a.device)  # the spare's warm-up makes the context
    import triton  # noqa: F401

    if a.warm_key:
        t0 = time.perf_counter()
        from opbench.run.worker import warm_triton_compiler

        warm_triton_compiler()
        print(f"Triton compiler key warmed ahead in {time.perf_counter() - t0:.3f} s")
    kernels = Path(a.kernels)
    cold = _round(a.device, kernels, profile=True)
    warm = _round(a.device, kernels, profile=False)
    print(
        f"first round (cold process, kernel on disk) {cold * 1e3:.1f} ms; second {warm * 1e3:.1f} ms"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--warm-key", action="store_true")
    p.add_argument("--kernels", help=argparse.SUPPRESS)  # the child's
    a = p.parse_args()
    if a.kernels:
        child(a)
        return
    with tempfile.TemporaryDirectory() as tmp:
        kernels = Path(tmp) / "kernels"
        (kernels / "abs__default").mkdir(parents=True)
        (kernels / "abs__default" / "abs__default_implementation.py").write_text(SOURCE)
        env = dict(
            os.environ, TRITON_CACHE_DIR=str(Path(tmp) / "triton"), TORCH_CPP_LOG_LEVEL="ERROR"
        )
        base = [sys.executable, __file__, "--device", a.device, "--kernels", str(kernels)]
        # compile once (the "cold compile" the Scorer reports apart), then the probe
        subprocess.run(base, env=env, check=True, capture_output=True)
        for warm_key in (False, True):
            print(f"==== fresh process, warm key: {warm_key}", flush=True)
            subprocess.run(base + (["--warm-key"] if warm_key else []), env=env, check=True)


if __name__ == "__main__":
    main()
