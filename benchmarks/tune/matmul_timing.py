"""Timing one traced matmul call with a configuration of the reference kernel, for the
tuners (``tune_matmul.py``) and their held-out reports (``matmul_heldout.py``): eager and
each configuration on the very operands the kernel gets, a configuration whose result
disagrees with eager's never eligible; and compiling many configurations at once first.
Timing: ``triton.testing.do_bench`` (L2 cleared before each repetition, median)."""

from __future__ import annotations

import json
import math
from typing import Any

from matmul_rows import operands, reference

__all__ = ["agrees", "bench", "device_bench", "measure_shape", "warm"]


def _warm_one(task: tuple[str, str, tuple[int, ...]]) -> str:
    """Compile (into Triton's disk cache) the kernel of one timing: run it once."""
    op, text, cfg = task
    try:
        from opbench.kernels._lib import matmul
        from opbench.spec.args import parse_args
        from opbench.suites.inputs import make_inputs

        call, kw = make_inputs(op, parse_args(text), "cuda", 0)
        out, a, b, bias, alpha, beta = operands(op, call, kw)
        matmul.matmul_into(out, a, b, bias, alpha, beta, cfg)
        return ""
    except Exception as e:  # timed (and reported) again in the parent
        return f"{op} {cfg}: {type(e).__name__}: {str(e)[:100]}"


def warm(tasks: list[tuple[str, str, tuple[int, ...]]], jobs: int) -> None:
    """Compile the kernels of ``tasks`` in ``jobs`` processes at once (a compile is about
    2 s and one process does one at a time); the timings then find them in Triton's cache."""
    import multiprocessing

    if jobs <= 1 or not tasks:
        return
    with multiprocessing.get_context("spawn").Pool(jobs) as pool:
        for err in pool.imap_unordered(_warm_one, tasks):
            if err:
                print(f"  warm-up: {err}", flush=True)


def measure_shape(row: dict[str, Any], cands: list[tuple[int, ...]]) -> dict[str, float]:
    """ms of eager and of each configuration on one traced call (inf where a result is
    wrong or a configuration fails)."""
    from opbench.kernels._lib import matmul
    from opbench.spec.args import parse_args
    from opbench.suites.inputs import make_inputs

    op, text = row["op"], row["args"]
    call, kw = make_inputs(op, parse_args(text), "cuda", 0)
    out, a, b, bias, alpha, beta = operands(op, call, kw)
    want = reference(op, call, kw).reshape(out.shape).float()
    times = {"eager": bench(lambda: reference(op, call, kw))}
    for c in cands:
        try:
            t = bench(lambda c=c: matmul.matmul_into(out, a, b, bias, alpha, beta, c))
            if not agrees(out, want):
                print(f"  {op} {c}: WRONG RESULT (not eligible)", flush=True)
                t = math.inf
        except Exception as e:  # shared memory, registers
            print(f"  {op} {c}: {type(e).__name__}: {str(e)[:100]}", flush=True)
            t = math.inf
        times[json.dumps(list(c))] = t
    return times


def bench(fn: Any) -> float:
    import triton

    return float(triton.testing.do_bench(fn, warmup=10, rep=40, return_mode="median"))


def device_bench(fn: Any, reps: int = 15, sleep_us: float = 150.0) -> float:
    """ms of device time per call of ``fn``, median of ``reps``, under the judge's
    device-time protocol (:mod:`opbench.instrument.cuda_env`): before each call the L2 is
    overwritten and a spin kernel keeps the GPU busy for ``sleep_us`` while the host
    queues the call, so the events bracket the call's kernels alone.

    Why not ``do_bench``: its events bracket the host's launch too wherever that outlasts
    the L2 flush. The matmul's host path is 20-50 us a call and its 1-4 GFLOP kernels run
    5-10 us on an H200, so ``do_bench`` read the same kernel at 11 us once and 27 us the
    next (``benchmarks/probes/matmul_rule_probe.py``, 2026-11-29)."""
    import torch

    from opbench.instrument.cuda_env import env_for, sleep_cycles

    device = torch.device("cuda", torch.cuda.current_device())
    env = env_for(device)
    fn()
    torch.cuda.synchronize()
    cycles = sleep_cycles(env, sleep_us)
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
             for _ in range(reps)]  # fmt: skip
    for start, end in pairs:
        env.prepare(True, cycles)
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) for s, e in pairs)
    return float(times[len(times) // 2])


def agrees(got: Any, want: Any) -> bool:
    """A configuration is eligible only if its result agrees with eager's (fp32
    accumulation both sides; the bound scales with the output's magnitude): a tile shape
    that computes something else must never win on time."""
    import torch

    scale = float(want.abs().max()) if want.numel() else 0.0
    return bool(torch.allclose(got.float(), want, rtol=2e-2, atol=2e-2 * max(scale, 1.0)))
