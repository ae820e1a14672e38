"""Host time a call of the matmul entry points on a GPU with and without their lanes
(``matmul._LANES``: a repeat call of a signature allocates and launches the TMA kernel
directly), beside eager's: best of 3 windows of 2,000 back-to-back calls, then a
synchronize, in microseconds, alternating the two settings in one process.

Why: an ``mm`` of 1024^3 on an H200 took 35 us of host time a call where eager's took 17,
of which the launch itself was about 8 (``host_profile.py --profile``, 2026-11-29). The
numbers in ``benchmarks/README.md`` are of a first version of the lanes that went around
Triton's launcher wrapper; the committed lanes launch through ``CompiledKernel.run``.

Usage (GPU machine, after ``source benchmarks/common/gpu_env.sh``):
    python3 benchmarks/probes/matmul_lane.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))


def per_call_us(fn: Any, args: tuple, kwargs: dict, calls: int = 2000) -> float:
    import torch

    for _ in range(50):
        fn(*args, **kwargs)
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(calls):
            fn(*args, **kwargs)
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - t) / calls * 1e6)
    return round(best, 1)


def main() -> None:
    import torch

    from opbench.kernels._lib import matmul

    h, dev = torch.float16, "cuda"

    def r(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, device=dev, dtype=h)

    cases = {
        "mm 1024x1024x1024": ("mm", (r(1024, 1024), r(1024, 1024)), {}),
        "mm 2048x768x768, B transposed": ("mm", (r(2048, 768), r(768, 768).t()), {}),
        "addmm 1024x1024x1024, row bias": ("addmm", (r(1024), r(1024, 1024), r(1024, 1024).t()), {}),
        "addmm 8192x768x768, row bias": ("addmm", (r(768), r(8192, 768), r(768, 768).t()), {}),
        "bmm 1x1024x1024x2048": ("bmm", (r(1, 1024, 2048), r(1, 2048, 1024)), {}),
    }  # fmt: skip
    keep = matmul._keep_lane
    rows = []
    for name, (op, args, kwargs) in cases.items():
        ours, eager = getattr(matmul, op), getattr(torch.ops.aten, op).default
        torch.testing.assert_close(
            ours(*args, **kwargs), eager(*args, **kwargs), rtol=2e-2, atol=2e-1
        )
        row = {"case": name, "eager_us": per_call_us(eager, args, kwargs)}
        for _ in range(2):
            matmul._LANES.clear()
            matmul._keep_lane = lambda key, lanes: None
            row["without_lane_us"] = min(
                row.get("without_lane_us", 1e9), per_call_us(ours, args, kwargs)
            )
            matmul._keep_lane = keep
            row["with_lane_us"] = min(row.get("with_lane_us", 1e9), per_call_us(ours, args, kwargs))
        row["laned"] = bool(matmul._LANES)
        rows.append(row)
        print(row, flush=True)


if __name__ == "__main__":
    main()
