"""The timing protocol checked against answers known in advance.

Five experiments, each a candidate whose true speedup we know:

* **aten vs aten**: the candidate *is* the reference; every speedup must be 1.00 within
  the measured noise (the published way, ``do_bench`` mean of one call each, gave only
  69% of real cases within 5% on an H100).
* **double work**: the candidate runs the op twice; on device-bound sizes its device
  time must come out near 0.5x.
* **host delay**: the candidate busy-waits 20 us on the host before launching; on
  host-bound (small) ops its host-inclusive time must grow by about 20 us while its
  device time stays at 1.00 (the L2 flush and the sleep hide host work by design).
* **side stream**: the candidate launches its work on another stream and returns
  without joining; it must be flagged ``side_stream_suspect`` and must not look faster.
* **python kernel**: a user's kernel directory whose kernel is a Python function calling
  the aten op, judged through the normal run path (worker, wrappers, observer); its
  host geomean must match the expected t_aten / t_python measured apart, in a plain
  subprocess (:mod:`opbench.judge.selftest_python_kernel`).

On CPU the same protocol runs with the wall-clock timer and looser expectations (there
is no separate device time, so the host delay shows in both times and the side-stream
experiment does not apply); that keeps the protocol tested in CI.
"""

from __future__ import annotations

import logging
import math
import platform
import time
from collections.abc import Callable, Collection
from typing import Any

import torch

from opbench.instrument.timing import PairTiming, TimingOptions, measure_launch_floor, time_pair
from opbench.report.means import geomean_of_timed

__all__ = ["EXPERIMENTS", "geomean", "run_selftest"]

#: The experiments, in the order they run (``run_selftest(only=...)`` picks some).
EXPERIMENTS = ("aten_vs_aten", "double_work", "host_delay", "side_stream", "python_kernel")

log = logging.getLogger(__name__)

aten = torch.ops.aten


def geomean(xs: list[float]) -> float:
    """:func:`~opbench.report.means.geomean_of_timed` (a case that failed is left out),
    NaN rather than ``None`` for no timed case: the self-test's JSON keeps a number."""
    g = geomean_of_timed(xs)
    return math.nan if g is None else g


def _maker(
    dev: torch.device, *specs: tuple[tuple[int, ...], torch.dtype]
) -> Callable[[], tuple[list, dict]]:
    """Inputs drawn on the CPU from a fixed seed, then moved (never zeros)."""

    def make() -> tuple[list, dict]:
        g = torch.Generator().manual_seed(1234)
        return [torch.randn(shape, generator=g).to(dev, dtype) for shape, dtype in specs], {}

    return make


def _cases(dev: torch.device, quick: bool) -> dict[str, list[tuple[str, Callable, Callable]]]:
    """``(label, op, make_args)`` per experiment, sized for the device."""
    f16, f32, bf16 = torch.float16, torch.float32, torch.bfloat16
    if dev.type == "cuda":
        same = [
            ("add f16 1K", aten.add.Tensor, _maker(dev, ((1024,), f16), ((1024,), f16))),
            ("add f16 1M", aten.add.Tensor, _maker(dev, ((1 << 20,), f16), ((1 << 20,), f16))),
            ("add f16 64M", aten.add.Tensor, _maker(dev, ((1 << 26,), f16), ((1 << 26,), f16))),
            ("relu_ f16 1M", aten.relu_.default, _maker(dev, ((1 << 20,), f16))),
            ("sum f32 16M", aten.sum.default, _maker(dev, ((1 << 24,), f32))),
            (
                "softmax f16 4096x4096",
                lambda x: aten._softmax.default(x, -1, False),
                _maker(dev, ((4096, 4096), f16)),
            ),
            (
                "mm bf16 1024",
                aten.mm.default,
                _maker(dev, ((1024, 1024), bf16), ((1024, 1024), bf16)),
            ),
            ("mm f16 4096", aten.mm.default, _maker(dev, ((4096, 4096), f16), ((4096, 4096), f16))),
        ]
        double = [
            ("add f16 64M", aten.add.Tensor, _maker(dev, ((1 << 26,), f16), ((1 << 26,), f16))),
            ("sum f32 64M", aten.sum.default, _maker(dev, ((1 << 26,), f32))),
            ("mm f16 4096", aten.mm.default, _maker(dev, ((4096, 4096), f16), ((4096, 4096), f16))),
        ]
        delay = [
            ("add f16 1K", aten.add.Tensor, _maker(dev, ((1024,), f16), ((1024,), f16))),
            ("mul f32 4K", aten.mul.Tensor, _maker(dev, ((4096,), f32), ((4096,), f32))),
            ("relu f16 1K", aten.relu.default, _maker(dev, ((1024,), f16))),
        ]
        side = [
            ("add f16 16M", aten.add.Tensor, _maker(dev, ((1 << 24,), f16), ((1 << 24,), f16))),
            ("add f16 64M", aten.add.Tensor, _maker(dev, ((1 << 26,), f16), ((1 << 26,), f16))),
            ("mm f16 4096", aten.mm.default, _maker(dev, ((4096, 4096), f16), ((4096, 4096), f16))),
        ]
        if quick:
            same, double, delay, side = same[:4], double[:1], delay[:1], side[:1]
        return {
            "aten_vs_aten": same,
            "double_work": double,
            "host_delay": delay,
            "side_stream": side,
        }
    same = [
        ("add f32 256K", aten.add.Tensor, _maker(dev, ((1 << 18,), f32), ((1 << 18,), f32))),
        ("mm f32 128", aten.mm.default, _maker(dev, ((128, 128), f32), ((128, 128), f32))),
        ("relu_ f32 64K", aten.relu_.default, _maker(dev, ((1 << 16,), f32))),
    ]
    double = [
        ("mm f32 256", aten.mm.default, _maker(dev, ((256, 256), f32), ((256, 256), f32))),
        ("sum f32 1M", aten.sum.default, _maker(dev, ((1 << 20,), f32))),
    ]
    delay = [("add f32 1K", aten.add.Tensor, _maker(dev, ((1024,), f32), ((1024,), f32)))]
    if quick:
        same = same[:2]
    return {"aten_vs_aten": same, "double_work": double, "host_delay": delay, "side_stream": []}


def _double(ref: Callable) -> Callable:
    def twice(*args: Any, **kwargs: Any) -> Any:
        ref(*args, **kwargs)
        return ref(*args, **kwargs)

    return twice


def _delayed(ref: Callable, us: float = 20.0) -> Callable:
    clock = time.perf_counter_ns
    wait_ns = int(us * 1000)

    def late(*args: Any, **kwargs: Any) -> Any:
        end = clock() + wait_ns
        while clock() < end:
            pass
        return ref(*args, **kwargs)

    return late


def _side_streamed(ref: Callable, dev: torch.device) -> Callable:
    side = torch.cuda.Stream(dev)

    def elsewhere(*args: Any, **kwargs: Any) -> Any:
        side.wait_stream(torch.cuda.current_stream(dev))  # inputs ready; no join back
        with torch.cuda.stream(side):
            return ref(*args, **kwargs)

    return elsewhere


def timing_row(label: str, t: PairTiming) -> dict[str, Any]:
    """The plain-data summary of one timed pair, as the self-test reports it."""
    return {
        "case": label,
        "speedup_device": t.speedup_device,
        "speedup_host": t.speedup_host,
        "spread": t.spread,
        "speedup_rel_err": t.speedup_rel_err,
        "ref_device_us": t.ref_device_ms * 1e3,
        "cand_device_us": t.cand_device_ms * 1e3,
        "ref_host_us": t.ref_host_ms * 1e3,
        "cand_host_us": t.cand_host_ms * 1e3,
        "reps": t.reps,
        "flags": list(t.flags),
    }


def _options(dev: torch.device, quick: bool) -> TimingOptions:
    if dev.type == "cuda":
        return TimingOptions(budget_ms=150.0 if quick else 300.0)
    return TimingOptions(
        warmup_ms=5.0, budget_ms=60.0 if quick else 150.0, host_budget_ms=30.0, host_rounds=5
    )


def run_selftest(
    device: str, *, quick: bool = False, only: Collection[str] | None = None
) -> dict[str, Any]:
    """Run the experiments on ``device`` (``only``: those named, default all of
    :data:`EXPERIMENTS`); a dict with each result and its verdict.

    Keys: ``aten_vs_aten`` (``cases``, ``geomean``, ``within_2pct``, ``within_5pct``
    as fractions), ``double_work`` (``geomean``), ``host_delay`` (``added_us``,
    ``device_geomean``), ``side_stream`` (``geomean``, ``flagged``), ``python_kernel``
    (``host_geomean``, ``expected_host_geomean``, ``ratio``), each with its per-case
    ``results``; ``checks`` (per experiment run: ``passed`` and what was expected) and
    ``passed`` (all checks).
    """
    wanted = set(EXPERIMENTS if only is None else only)
    unknown = wanted - set(EXPERIMENTS)
    if unknown:
        raise ValueError(f"unknown experiment(s) {sorted(unknown)}; choose from {EXPERIMENTS}")
    dev = torch.device(device)
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    started = time.perf_counter()
    opts = _options(dev, quick)
    cases = _cases(dev, quick)
    floor = measure_launch_floor(dev)
    out: dict[str, Any] = {
        "device": str(dev),
        "device_name": torch.cuda.get_device_name(dev)
        if dev.type == "cuda"
        else platform.processor() or platform.machine(),
        "timer": "cuda-event" if dev.type == "cuda" else "cpu-wall",
        "quick": quick,
        "launch_floor_ms": floor,
        "options": vars(opts),
    }

    def run(name: str, wrap: Callable[[Callable], Callable]) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        for label, ref, make in cases[name] if name in wanted else []:
            try:
                t = time_pair(ref, wrap(ref), make, dev, opts)
                rows.append(timing_row(label, t))
                log.info(
                    "%s %s: device %.3fx host %.3fx", name, label, t.speedup_device, t.speedup_host
                )
            except Exception as e:  # noqa: BLE001 - record and go on
                rows.append({"case": label, "error": f"{type(e).__name__}: {e}"})
        return rows

    rows = run("aten_vs_aten", lambda ref: ref)
    sp = [r["speedup_device"] for r in rows if "error" not in r]
    out["aten_vs_aten"] = {
        "cases": len(sp),
        "geomean": geomean(sp),
        "within_2pct": sum(abs(s - 1) <= 0.02 for s in sp) / len(sp) if sp else math.nan,
        "within_5pct": sum(abs(s - 1) <= 0.05 for s in sp) / len(sp) if sp else math.nan,
        "host_geomean": geomean([r["speedup_host"] for r in rows if "error" not in r]),
        "results": rows,
    }
    rows = run("double_work", _double)
    out["double_work"] = {
        "geomean": geomean([r["speedup_device"] for r in rows if "error" not in r]),
        "host_geomean": geomean([r["speedup_host"] for r in rows if "error" not in r]),
        "results": rows,
    }
    rows = run("host_delay", _delayed)
    ok = [r for r in rows if "error" not in r]
    added = sorted(r["cand_host_us"] - r["ref_host_us"] for r in ok)
    out["host_delay"] = {
        "added_us": added[len(added) // 2] if added else math.nan,
        "device_added_us": sorted(r["cand_device_us"] - r["ref_device_us"] for r in ok)[
            len(ok) // 2
        ]
        if ok
        else math.nan,
        "device_geomean": geomean([r["speedup_device"] for r in ok]),
        "results": rows,
    }
    if dev.type == "cuda":
        rows = run("side_stream", lambda ref: _side_streamed(ref, dev))
        ok = [r for r in rows if "error" not in r]
        out["side_stream"] = {
            "geomean": geomean([r["speedup_device"] for r in ok]),
            "flagged": sum("side_stream_suspect" in r["flags"] for r in ok),
            "cases": len(ok),
            "results": rows,
        }
    else:
        out["side_stream"] = {"geomean": None, "note": "not applicable on CPU", "results": []}
    if "python_kernel" in wanted:
        from opbench.judge.selftest_python_kernel import run_python_kernel_case

        try:
            out["python_kernel"] = run_python_kernel_case(str(dev), quick=quick)
        except Exception as e:  # noqa: BLE001 - the case failed to run: its verdict
            out["python_kernel"] = {"error": f"{type(e).__name__}: {e}", "results": []}
    for name in EXPERIMENTS:  # those not asked for leave no (empty) entry
        if name not in wanted:
            out.pop(name, None)
    checks = _checks(out, dev.type == "cuda")
    out["checks"] = {name: c for name, c in checks.items() if name in wanted}
    out["passed"] = all(c["passed"] for c in out["checks"].values())
    out["duration_s"] = time.perf_counter() - started
    return out


def _checks(r: dict[str, Any], cuda: bool) -> dict[str, dict[str, Any]]:
    """Each experiment's verdict against what it must show (looser on CPU)."""
    none: dict[str, Any] = {"geomean": math.nan, "within_5pct": math.nan, "added_us": math.nan,
                            "device_geomean": math.nan, "cases": 0, "flagged": 0}  # fmt: skip
    same, dbl, delay, side = (
        r.get(name, none) for name in ("aten_vs_aten", "double_work", "host_delay", "side_stream")
    )
    checks: dict[str, dict[str, Any]] = {}
    if cuda:
        checks["aten_vs_aten"] = {
            "expect": "every case within +-5%, geomean within 1.000 +- 0.005",
            "passed": same["within_5pct"] == 1.0 and abs(same["geomean"] - 1) <= 0.005,
        }
        checks["double_work"] = {
            "expect": "device geomean in [0.45, 0.55]",
            "passed": 0.45 <= dbl["geomean"] <= 0.55,
        }
        checks["host_delay"] = {
            "expect": "host-inclusive +15..+30 us; device geomean within 5% of 1",
            "passed": 15 <= delay["added_us"] <= 30 and abs(delay["device_geomean"] - 1) <= 0.05,
        }
        checks["side_stream"] = {
            "expect": "every case flagged side_stream_suspect, device geomean <= 1.02",
            "passed": side["cases"] > 0
            and side["flagged"] == side["cases"]
            and side["geomean"] <= 1.02,
        }
    else:
        checks["aten_vs_aten"] = {
            "expect": "geomean within 1.00 +- 0.10 (CPU wall clock)",
            "passed": abs(same["geomean"] - 1) <= 0.10,
        }
        checks["double_work"] = {"expect": "geomean <= 0.75", "passed": dbl["geomean"] <= 0.75}
        checks["host_delay"] = {
            "expect": "host-inclusive at least +10 us (CPU: device time grows too)",
            "passed": delay["added_us"] >= 10,
        }
    if "python_kernel" in r:
        checks["python_kernel"] = r["python_kernel"].get(
            "check", {"expect": "the case runs", "passed": False}
        )
    return checks
