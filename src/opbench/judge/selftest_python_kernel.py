"""A known-answer host case for ``opbench selftest``: a user's Python kernel that calls
the aten op, judged through the normal run path.

The other self-test experiments time aten against aten in one process, which skips
what the worker puts around a user's kernel: loading it from a kernel directory, and
the wrappers and observers around each timed call. Here the candidate is the plainest
user kernel there is::

    def relu__default_kernel_impl(x):
        return torch.ops.aten.relu.default(x)

written into a temporary kernel directory and judged by ``opbench run`` with timing on
and ``--allow-pytorch`` (delegating to PyTorch is its point, not a failure), exactly
as a user's directory is.

Its true host-inclusive speedup is known apart from the judge: it pays one Python call
more than aten. A plain subprocess on the same device (no worker, no sandbox, no
observer, no kept outputs) loads the kernel the way the worker does
(:func:`opbench.backends.loader.load_backend`, then ``kernel_for``) and times
back-to-back calls of ``aten.relu.default`` and of the loaded kernel: wall clock, a
fresh input copy per call, rounds in A B / B A order, the median per side; expected =
t_aten / t_kernel. It runs :data:`MEASUREMENTS` times, once before the judged run and
the others after, each in a fresh process, and the median is kept: on a 2-core CPU one
process's 1M-float measurement once came out 2.3x apart from the others (0.41 and 2.34
against 0.98), for the whole of its rounds, and a change of the machine's load shows
as a spread of the runs.

The judge's host geomean must come out within :data:`TOLERANCE` of the expected one: a
judge that charges its own bookkeeping to one side (the kept-output wrapper around the
candidate only, say) shows here as a gap, where aten against aten cannot see it.
"""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from opbench.report.means import geomean_of_timed

__all__ = ["KERNEL_SOURCE", "TOLERANCE", "run_python_kernel_case"]

#: The operator, its kernel folder, and the kernel a user would write for it.
OP = "relu.default"
FOLDER = "relu__default"
KERNEL_SOURCE = '''"""The self-test's known answer: a Python function around the aten op."""

import torch


def relu__default_kernel_impl(x):
    return torch.ops.aten.relu.default(x)
'''

#: How far the judge's host geomean may be from the expected one (a fraction).
TOLERANCE = 0.03

#: Shapes (float32) per device: small ones are host-bound, where the extra Python
#: call shows; a large one sits near 1.0.
SHAPES = {
    "cpu": [(1024,), (1 << 16,), (1 << 20,)],
    "cuda": [(1024,), (1 << 20,), (1 << 24,)],
}
#: Interleaved rounds per side and the target length of one round in the subprocess.
ROUNDS, QUICK_ROUNDS = 41, 15
ROUND_MS = 5.0
#: At most this much memory for one round's input copies (as the judge's host rounds).
POOL_BYTES = 512 << 20
#: Subprocess measurements of the expected speedup (the median is kept).
MEASUREMENTS = 3


def _label(shape: tuple[int, ...]) -> str:
    n = math.prod(shape)
    size = f"{n >> 20}M" if n >= 1 << 20 else f"{n >> 10}K" if n >= 1 << 10 else str(n)
    return f"relu f32 {size}"


def _trace(shapes: list[tuple[int, ...]]) -> str:
    lines = [f"Operator: aten.{OP}"]
    lines += [f"cnt: 1, ((T({list(s)}, f32),), {{}})" for s in shapes]
    return "\n".join(lines) + "\n"


def write_kernel_dir(root: Path) -> Path:
    """A kernel directory in the user's layout holding the one Python kernel."""
    folder = root / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{FOLDER}_implementation_v1.py").write_text(KERNEL_SOURCE)
    return root


# ------------------------------------------------------------------ the expected answer


def measure_expected(
    kernel_dir: Path, device: str, shapes: list[tuple[int, ...]], rounds: int, threads: int
) -> list[dict[str, Any]]:
    """Run :func:`_measure` in a plain subprocess (a fresh interpreter, nothing of the
    judge's loaded); one row per shape with both medians and ``expected``."""
    request = {
        "kernel_dir": str(kernel_dir),
        "device": device,
        "shapes": [list(s) for s in shapes],
        "rounds": rounds,
        "threads": threads,
    }
    proc = subprocess.run(
        [sys.executable, "-m", __name__, json.dumps(request)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"the expected-speedup subprocess failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _measure(request: dict[str, Any]) -> list[dict[str, Any]]:
    """In the subprocess: medians of back-to-back calls, aten and the loaded kernel."""
    import gc

    import torch

    from opbench.backends.loader import load_backend

    torch.set_num_threads(int(request["threads"]))
    device = request["device"]
    dev = torch.device(device)
    cuda = dev.type == "cuda"
    sync = (lambda: torch.cuda.synchronize(dev)) if cuda else (lambda: None)
    kernel = load_backend(request["kernel_dir"], device, only={FOLDER}).kernel_for(OP)
    if kernel is None:
        raise RuntimeError(f"the kernel directory serves no {OP}")
    sides = {"aten": torch.ops.aten.relu.default, "kernel": kernel}
    rows = []
    for shape in request["shapes"]:
        x = torch.randn(shape, generator=torch.Generator().manual_seed(0)).to(dev)
        for fn in sides.values():  # warm both paths (first calls, allocator)
            for _ in range(20):
                fn(x.clone())
        sync()
        t0 = time.perf_counter_ns()
        for _ in range(20):
            sides["aten"](x.clone())
        sync()
        per_call_ms = (time.perf_counter_ns() - t0) / 20 / 1e6
        calls = int(min(max(ROUND_MS / max(per_call_ms, 1e-4), 10), 2000))
        calls = max(2, min(calls, POOL_BYTES // (x.numel() * x.element_size())))
        times: dict[str, list[float]] = {name: [] for name in sides}
        for r in range(int(request["rounds"])):
            order = list(sides) if r % 2 == 0 else list(reversed(sides))
            for name in order:
                fn = sides[name]
                pool = [x.clone() for _ in range(calls)]  # a fresh input per call
                sync()
                gc.disable()
                t0 = time.perf_counter_ns()
                for a in pool:
                    fn(a)
                sync()
                t1 = time.perf_counter_ns()
                gc.enable()
                del pool
                times[name].append((t1 - t0) / calls / 1e3)
        t_aten, t_kernel = (statistics.median(times[n]) for n in ("aten", "kernel"))
        rows.append(
            {
                "case": _label(tuple(shape)),
                "aten_us": t_aten,
                "kernel_us": t_kernel,
                "expected": t_aten / t_kernel,
                "calls": calls,
                "rounds": int(request["rounds"]),
            }
        )
    return rows


# ------------------------------------------------------------------ the judged run


def _judge(kernel_dir: Path, trace: Path, out: Path, device: str) -> list[Any]:
    """``opbench run`` on the kernel directory, as a user runs it; its test results."""
    from opbench.run.session import RunRequest, run
    from opbench.run.store import ResultStore

    run(
        RunRequest(
            suite=f"traces:{trace}",
            backend=str(kernel_dir),
            device=device,
            perf=True,
            allow_pytorch=True,
            sandbox="auto",
            out=out,
        )
    )
    store = ResultStore(out / "results.sqlite")
    try:
        return list(store.results())
    finally:
        store.close()


def run_python_kernel_case(
    device: str, *, quick: bool = False, work_dir: Path | None = None
) -> dict[str, Any]:
    """The case on ``device``: the judge's host geomean, the expected one, and a check.

    Keys: ``host_geomean`` (the judge's), ``expected_host_geomean`` (per case the
    median of the subprocess measurements), ``ratio`` (judge / expected), ``results``
    (per case: judge and expected speedups, every measurement's ``expected_runs``, the
    judge's host times and the median measurement's),
    ``check`` (``expect`` and ``passed``: every test passed and ``ratio`` within
    :data:`TOLERANCE` of 1). ``work_dir`` keeps the kernel directory and run there.
    """
    from opbench.run.session import cpu_share

    kind = "cuda" if device.startswith("cuda") else "cpu"
    shapes = SHAPES[kind]
    rounds = QUICK_ROUNDS if quick else ROUNDS
    threads = cpu_share(1)  # what the run gives its one worker
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="opbench-selftest-") as tmp:
        root = Path(work_dir) if work_dir is not None else Path(tmp)
        kernel_dir = write_kernel_dir(root / "kernels")
        trace = root / "trace.txt"
        trace.write_text(_trace(shapes))
        runs = [measure_expected(kernel_dir, device, shapes, rounds, threads)]
        results = _judge(kernel_dir, trace, root / f"run-{time.strftime('%H%M%S')}", device)
        for _ in range(MEASUREMENTS - 1):
            runs.append(measure_expected(kernel_dir, device, shapes, rounds, threads))
    by_case = {r.args: r for r in results}
    rows = []
    for i, shape in enumerate(shapes):
        r = by_case.get(f"((T({list(shape)}, f32),), {{}})")
        measured = sorted((run[i] for run in runs), key=lambda m: m["expected"])
        mid = measured[len(measured) // 2]
        rows.append(
            {
                "case": mid["case"],
                "status": r.status if r else "missing",
                "message": (r.message if r and r.status != "passed" else "")[:300],
                "speedup_host": r.speedup_host if r else None,
                "expected": mid["expected"],
                "expected_runs": [run[i]["expected"] for run in runs],
                "ref_host_us": r.ref_host_ms * 1e3 if r and r.ref_host_ms else None,
                "cand_host_us": r.cand_host_ms * 1e3 if r and r.cand_host_ms else None,
                "aten_us": mid["aten_us"],
                "kernel_us": mid["kernel_us"],
            }
        )
    judged = [x["speedup_host"] for x in rows if x["speedup_host"] is not None]
    host = geomean_of_timed(judged)
    expected = geomean_of_timed([x["expected"] for x in rows])
    ratio = host / expected if host is not None and expected is not None else math.nan
    host = math.nan if host is None else host  # the JSON keeps a number
    expected = math.nan if expected is None else expected
    all_passed = all(x["status"] == "passed" for x in rows) and len(judged) == len(rows)
    return {
        "host_geomean": host,
        "expected_host_geomean": expected,
        "ratio": ratio,
        "cases": len(judged),
        "results": rows,
        "duration_s": time.perf_counter() - started,
        "check": {
            "expect": (
                f"every test passed; judge host geomean within +-{TOLERANCE:.0%} of the "
                "expected t_aten / t_python (measured apart)"
            ),
            "passed": all_passed and abs(ratio - 1) <= TOLERANCE,
        },
    }


if __name__ == "__main__":
    print(json.dumps(_measure(json.loads(sys.argv[1]))))
