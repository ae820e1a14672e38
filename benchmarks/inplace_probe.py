"""Why did in-place ops time at 0.6x eager on the traces suite when the same compiled
kernel out of place timed at 1.0x? (opbench.kernels ``add_`` and ``add`` share one
compiled kernel.) Times the pair with ``instrument.timing.time_pair`` outside a worker, and
with bare CUDA events around a fresh clone + L2 flush per repetition.

Usage (GPU machine): python3 benchmarks/inplace_probe.py
"""

from __future__ import annotations

import statistics

import torch

from opbench.instrument.timing import time_pair
from opbench.kernels._lib import activations as act
from opbench.kernels._lib import arithmetic as ar


def events(fn, make, flush: torch.Tensor, reps: int = 50) -> float:
    times = []
    for _ in range(reps):
        args = make()
        flush.zero_()
        torch.cuda._sleep(100_000)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn(*args)
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) * 1e3)
    return statistics.median(times)


def main() -> None:
    x = torch.randn(64, 1024, 14, 14, device="cuda", dtype=torch.float16)
    y = torch.randn_like(x)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    cases = {
        "add_": (lambda a, b: a.add_(b), ar.add_, lambda: (x.clone(), y)),
        "add": (torch.add, ar.add, lambda: (x, y)),
        "hardtanh_": (
            lambda a: torch.ops.aten.hardtanh_(a, 0.0, 6.0),
            lambda a: act.hardtanh_(a, 0.0, 6.0),
            lambda: (x.clone(),),
        ),
    }
    for name, (eager, ours, make) in cases.items():
        for _ in range(3):
            ours(*make())
        t = time_pair(eager, ours, lambda make=make: (list(make()), {}), "cuda")
        print(
            f"{name}: time_pair ref {t.ref_device_ms * 1e3:.1f} us cand {t.cand_device_ms * 1e3:.1f}"
            f" us (device x{t.speedup_device:.3f}); host ref {t.ref_host_ms * 1e3:.1f} cand "
            f"{t.cand_host_ms * 1e3:.1f} us; events eager {events(eager, make, flush):.1f} us, "
            f"ours {events(ours, make, flush):.1f} us"
        )


if __name__ == "__main__":
    main()
