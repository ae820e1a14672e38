"""Does the harness's planning scale over GPUs, and if not, what holds it: a suite's tests
planned (:func:`opbench.judge.expectations.plan_trials`, the harness's work per test:
inputs drawn, eager and the float64 reference run) over N devices, on N threads of one
process (as the harness's slots do today) or in N processes, each pass timed.

Why: on 2 x H100 the OpInfo suite's run took longer on 2 GPUs than on 1 (147.5 s of tests
against 124.8 s, ``results/scaling-opinfo-h100x2.md``), and py-spy put the slot's planning
thread, not the worker, on its critical path, 25 ms of a test's 32 ms inside the op's two
calls (``results/harness-profile-opinfo-h200.md``). Two explanations predict different
numbers here:

- first-use costs per kernel and CUDA context (lazy module loading): the second pass over
  the same tests is much faster than the first, in threads and processes alike;
- serialisation inside one process (the GIL's hand-over, a driver lock): N processes plan
  about N times faster than N threads, while one thread and one process take the same.

Each device's share is the tests of whole operators, dealt in turn (as the executor's
chunks keep an operator's tests together). Import and suite loading come before the
clock starts, behind a barrier.

Usage: python3 benchmarks/probes/planning_scaling.py --suite opinfo --device cuda \\
    --devices 2 --mode threads,processes [--passes 2] [--dtypes f32] [--limit 800] \\
    [--traces DIR] [--out planning.json]
Set ``CUDA_MODULE_LOADING=EAGER`` on the command to load every kernel at context creation;
``--switch-interval 0.0005`` shortens how long a thread that released the GIL (every torch
op does) may wait to take it back while another runs Python (default 0.005 s).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))


def _cases(ns: argparse.Namespace) -> list[Any]:
    from opbench.run.session import load_suite_cases, select_cases
    from opbench.run.setup import RunRequest

    req = RunRequest(suite=ns.suite, backend="aten", device=ns.device, traces=ns.traces,
                     dtypes=ns.dtypes.split(",") if ns.dtypes else None,
                     limit_per_op=ns.limit_per_op)  # fmt: skip
    cases = [c for c in select_cases(req, load_suite_cases(req, None)).cases if c.included]
    return cases[: ns.limit] if ns.limit else cases


def _shares(cases: list[Any], n: int) -> list[list[Any]]:
    """Whole operators dealt in turn to ``n`` devices."""
    by_op: dict[str, list[Any]] = {}
    for c in cases:
        by_op.setdefault(c.op, []).append(c)
    shares: list[list[Any]] = [[] for _ in range(n)]
    for i, group in enumerate(by_op.values()):
        shares[i % n].extend(group)
    return shares


def _device(ns: argparse.Namespace, i: int) -> str:
    return f"cuda:{i}" if ns.device.startswith("cuda") else ns.device


def _plan_share(share: list[Any], device: str, passes: int) -> dict[str, Any]:
    """Plan every test of ``share`` on ``device``, ``passes`` times; seconds a pass."""
    from opbench.instrument.tensors import bind_device
    from opbench.judge.expectations import plan_trials
    from opbench.spec.judge_options import JudgeOptions

    bind_device(device)
    options = JudgeOptions()
    seconds, errors = [], 0
    for _ in range(passes):
        t0 = time.perf_counter()
        for case in share:
            try:
                plan_trials(case, device, options)
            except Exception:  # noqa: BLE001 - counted: the harness records these too
                errors += 1
        if device.startswith("cuda"):
            import torch

            torch.cuda.synchronize()
        seconds.append(round(time.perf_counter() - t0, 2))
    return {"device": device, "tests": len(share), "pass_s": seconds, "errors": errors}


def _process_main(ns: argparse.Namespace, i: int, barrier: Any, answers: Any) -> None:
    warnings.filterwarnings("ignore")
    share = _shares(_cases(ns), ns.devices)[i]
    import opbench.judge.expectations  # noqa: F401 - imported before the clock

    barrier.wait()
    answers.put(_plan_share(share, _device(ns, i), ns.passes))


def _threads(ns: argparse.Namespace, cases: list[Any]) -> dict[str, Any]:
    shares = _shares(cases, ns.devices)
    out: list[Any] = [None] * ns.devices

    def one(i: int) -> None:
        out[i] = _plan_share(shares[i], _device(ns, i), ns.passes)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(ns.devices)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"wall_s": round(time.perf_counter() - t0, 2), "devices": out}


def _processes(ns: argparse.Namespace) -> dict[str, Any]:
    ctx = multiprocessing.get_context("spawn")  # a fresh CUDA state each
    barrier, answers = ctx.Barrier(ns.devices + 1), ctx.Queue()
    procs = [ctx.Process(target=_process_main, args=(ns, i, barrier, answers))
             for i in range(ns.devices)]  # fmt: skip
    for p in procs:
        p.start()
    barrier.wait(timeout=900)  # every process has loaded the suite
    t0 = time.perf_counter()
    out = sorted((answers.get(timeout=1800) for _ in procs), key=lambda d: d["device"])
    wall = round(time.perf_counter() - t0, 2)
    for p in procs:
        p.join()
    return {"wall_s": wall, "devices": out}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--suite", choices=["opinfo", "traces"], default="opinfo")
    p.add_argument("--traces", default=None)
    p.add_argument("--device", default="cuda")
    p.add_argument("--devices", type=int, default=1, help="GPUs (threads or processes)")
    p.add_argument("--mode", default="threads,processes", help="threads, processes or both")
    p.add_argument("--passes", type=int, default=2, help="planning passes over each share")
    p.add_argument("--dtypes", default=None)
    p.add_argument("--limit-per-op", type=int, default=None)
    p.add_argument("--limit", type=int, default=None, help="at most this many tests")
    p.add_argument("--out", default=None)
    p.add_argument("--switch-interval", type=float, default=None, help="sys.setswitchinterval")
    ns = p.parse_args()
    if ns.switch_interval:
        sys.setswitchinterval(ns.switch_interval)
    if ns.suite == "traces" and not ns.traces:
        p.error("--suite traces needs --traces")
    warnings.filterwarnings("ignore")
    result: dict[str, Any] = {
        "command": "python3 benchmarks/probes/planning_scaling.py " + " ".join(sys.argv[1:]),
        "cuda_module_loading": os.environ.get("CUDA_MODULE_LOADING", "(default: lazy)"),
        "switch_interval_s": sys.getswitchinterval(),
        "runs": {},
    }
    modes = ns.mode.split(",")
    if "processes" in modes:  # first: the parent has not touched CUDA yet
        result["runs"]["processes"] = _processes(ns)
        print(json.dumps(result["runs"]["processes"]), flush=True)
    if "threads" in modes:
        cases = _cases(ns)
        result["tests"] = len(cases)
        result["runs"]["threads"] = _threads(ns, cases)
        print(json.dumps(result["runs"]["threads"]), flush=True)
    import torch

    result.update(torch=torch.__version__, devices=ns.devices, device=ns.device,
                  gpu=torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu")  # fmt: skip
    text = json.dumps(result, indent=1)
    if ns.out:
        Path(ns.out).write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
