"""Host time a call of the matmul entry points on a GPU with and without their lanes
(``matmul_lanes.LANES``: a repeat call of a signature allocates and launches the kernel
that served its first call), beside eager's: best of 3 windows of 2,000 back-to-back calls, then a
synchronize, in microseconds, alternating the two settings in one process.

Why: an ``mm`` of 1024^3 on an H200 took 35 us of host time a call where eager's took 17,
of which the launch itself was about 8 (``host_profile.py --profile``, 2026-11-29). Each
case's laned result is checked against eager's after the timing.

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

    from opbench.kernels._lib import matmul, matmul_lanes

    h, dev = torch.float16, "cuda"

    def r(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, device=dev, dtype=h)

    cases = {
        "mm 1024x1024x1024": ("mm", (r(1024, 1024), r(1024, 1024)), {}),
        "mm 2048x768x768, B transposed": ("mm", (r(2048, 768), r(768, 768).t()), {}),
        "addmm 1024x1024x1024, row bias": ("addmm", (r(1024), r(1024, 1024), r(1024, 1024).t()), {}),
        "addmm 8192x768x768, row bias": ("addmm", (r(768), r(8192, 768), r(768, 768).t()), {}),
        "bmm 1x1024x1024x2048": ("bmm", (r(1, 1024, 2048), r(1, 2048, 1024)), {}),
        "mm 128x2048x2048 (split-K)": ("mm", (r(128, 2048), r(2048, 2048)), {}),
        "bmm 128x128x64x128": ("bmm", (r(128, 128, 64), r(128, 64, 128)), {}),
        "bmm 16x512x512x64": ("bmm", (r(16, 512, 64), r(16, 64, 512)), {}),
        "baddbmm 12x256x256x64": ("baddbmm", (r(12, 256, 256), r(12, 256, 64), r(12, 64, 256)), {}),
    }  # fmt: skip
    rows = []
    for name, (op, args, kwargs) in cases.items():
        ours, eager = getattr(matmul, op), getattr(torch.ops.aten, op).default
        torch.testing.assert_close(
            ours(*args, **kwargs), eager(*args, **kwargs), rtol=2e-2, atol=2e-1
        )
        row = {"case": name, "eager_us": per_call_us(eager, args, kwargs)}
        for _ in range(2):
            matmul_lanes.LANES.clear()
            matmul_lanes.LANES_OFF.append("off for the probe")  # nothing kept
            row["without_lane_us"] = min(
                row.get("without_lane_us", 1e9), per_call_us(ours, args, kwargs)
            )
            matmul_lanes.LANES_OFF.clear()
            row["with_lane_us"] = min(row.get("with_lane_us", 1e9), per_call_us(ours, args, kwargs))
        row["laned"] = bool(matmul_lanes.LANES)
        torch.testing.assert_close(
            ours(*args, **kwargs), eager(*args, **kwargs), rtol=2e-2, atol=2e-1
        )
        rows.append(row)
        print(row, flush=True)


if __name__ == "__main__":
    main()
