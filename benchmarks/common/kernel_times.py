"""What the probes that read a call's GPU kernels share: each kernel's mean device time a
call, as CUPTI records it (``torch.profiler``), the host's launch gaps left out. The
judge's own event clock (``benchmarks/tune/matmul_timing.py``'s ``device_bench``) holds
the launch's cost on the GPU besides; set side by side, the two put a gap on the kernel
or on its launch (``benchmarks/probes/small_elementwise.py``)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

__all__ = ["kernel_times_us"]


def kernel_times_us(fn: Callable[[], Any], calls: int = 20, warmup: int = 1) -> dict[str, float]:
    """Kernel name (its first 60 characters) -> mean device µs a call, over ``calls``
    calls of ``fn`` after ``warmup`` untimed ones, the largest first."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    times: dict[str, float] = defaultdict(float)
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            times[e.name[:60]] += e.device_time / calls
    return dict(sorted(times.items(), key=lambda kv: -kv[1]))
