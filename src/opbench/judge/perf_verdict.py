"""Folding a worker's timing into a test result: speedups, canary flags, roofline, cheats.

Runs in the harness. The times themselves come from the worker (where the kernel
runs); the harness recomputes everything derived from them, and applies the
speed-of-light check: a candidate faster than the memory system allows is a
``cheat``, not a speedup.
"""

from __future__ import annotations

import math
from typing import Any

from opbench.judge import roofline
from opbench.judge.timing_rules import HOST_BOUND_FACTOR, OVERHEAD_FACTOR, derive
from opbench.run.store import TestResult
from opbench.suites.case import Case

__all__ = ["HOST_BOUND_FACTOR", "OVERHEAD_FACTOR", "apply_timing", "work_for"]


#: What a worker's timing message may claim and the harness ignores (it derives them).
_DERIVED = (
    "flags",
    "speedup_device",
    "speedup_host",
    "event_speedup_device",
    "speedup_graph",
    "relative_runtime_to_kernel_launch",
    "cand_relative_runtime_to_kernel_launch",
    "derived",
)


def _finite_positive(x: Any) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


def apply_timing(
    result: TestResult,
    case: Case,
    timing: dict[str, Any],
    device: str,
    work: dict[str, Any] | None = None,
) -> None:
    """Fill ``result``'s times, speedups, flags and roofline from the worker's timing.

    Only the worker's measurements are read: every speedup and flag is derived here
    (:func:`opbench.judge.timing_rules.derive`), whatever else the message claims."""
    t = dict(timing)
    for claimed in _DERIVED:
        t.pop(claimed, None)
    derived = derive(t)
    t["derived"] = derived
    result.timing = t
    ref_dev, cand_dev = t.get("ref_device_ms"), t.get("cand_device_ms")
    ref_host, cand_host = t.get("ref_host_ms"), t.get("cand_host_ms")
    if not all(_finite_positive(x) for x in (ref_dev, cand_dev)):
        result.flags = sorted(set(result.flags) | {"untimed"})
        result.details["timing_error"] = f"unusable device times ref={ref_dev!r} cand={cand_dev!r}"
        return
    result.ref_device_ms, result.cand_device_ms = ref_dev, cand_dev
    result.speedup = derived["speedup_device"]
    if _finite_positive(ref_host) and _finite_positive(cand_host):
        result.ref_host_ms, result.cand_host_ms = ref_host, cand_host
        result.speedup_host = derived["speedup_host"]
    result.spread = t.get("spread")
    flags = set(derived["flags"])
    if work and "work" in work and "peaks" in work:
        w = roofline.Work(**work["work"])
        peaks = roofline.Peaks(**work["peaks"])
        dtype = work.get("dtype")
        result.details["roofline"] = {
            "formula": w.formula,
            "bytes": w.bytes,
            "flops": w.flops,
            "ref": roofline.roofline(w, ref_dev, peaks, dtype),
            "cand": roofline.roofline(w, cand_dev, peaks, dtype),
        }
        if device.startswith("cuda"):
            reason = roofline.cheat_check(w, cand_dev, peaks, dtype=dtype)
            if reason:
                result.status = "failed"
                result.category = "cheat"
                result.message = f"faster than the hardware allows: {reason}"
                result.speedup = result.speedup_host = None
    elif work and work.get("error"):
        result.details["roofline_error"] = work["error"]
    result.flags = sorted(flags)


def work_for(case: Case, device: str) -> dict[str, Any] | None:
    """Bytes and FLOPs the op must do, from the harness's own run of the reference, and
    the device's measured peaks (once per process), for the roofline. Failures here
    never fail the test; they are noted as ``roofline_error``."""
    import torch

    from opbench.spec.ops import get_overload
    from opbench.suites.materialize import materialize

    try:
        ref = get_overload(case.op)
        args, kwargs = materialize(case, device)
        outputs = ref(*args, **kwargs)
        work = roofline.work_of(case.op, args, kwargs, outputs)
        peaks = roofline.measure_peaks(device)
        dtype = next(
            (
                str(t.dtype).replace("torch.", "")
                for t in _tensors(args)
                if isinstance(t, torch.Tensor)
            ),
            None,
        )
        return {"work": work.to_dict(), "peaks": peaks.to_dict(), "dtype": dtype}
    except Exception as e:  # roofline is information, not a verdict input
        return {"error": f"{type(e).__name__}: {e}"}


def _tensors(args: Any) -> list[Any]:
    from opbench.suites.materialize import tensors_in

    return tensors_in(list(args))
