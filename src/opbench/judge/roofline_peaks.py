"""What the device can do: its copy bandwidth and matmul rates, measured once.

Owns :class:`Peaks` (the measured ceilings, and the rate that applies to a dtype),
:func:`measure_peaks` (a large device-to-device copy and square matmuls, cached in memory
and as JSON under ``OPBENCH_CACHE_DIR`` per device and torch version) and
:func:`dtype_name`. The roofline (:mod:`opbench.judge.roofline`) divides a test's
:class:`~opbench.judge.roofline_work.Work` by these.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from opbench.cache import cache_dir
from opbench.spec.args import NAME_BY_DTYPE

__all__ = ["Peaks", "dtype_name", "measure_peaks"]

log = logging.getLogger(__name__)


@dataclass
class Peaks:
    """Measured ceilings of one device: copy bandwidth (read + write) and matmul rates."""

    bandwidth_Bps: float
    matmul_flops: dict[str, float] = field(default_factory=dict)
    l2_bytes: int = 0
    device_name: str = ""
    note: str = ""

    def flops_for(self, dtype: str | torch.dtype | None) -> float:
        """The matmul rate for ``dtype`` (f32 also considers tf32).

        A dtype with no measured rate (integers, fp8, none given) gets the highest rate
        measured: the floor is then a lower bound, so the cheat check can only err on the
        side of not flagging.
        """
        rates = self.matmul_flops
        name = dtype_name(dtype) if dtype is not None else None
        if name == "f32":
            return max(rates.get("f32", 0.0), rates.get("tf32", 0.0)) or math.nan
        if name in rates and rates[name]:
            return rates[name]
        return max(rates.values(), default=0.0) or math.nan

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def dtype_name(dtype: str | torch.dtype) -> str:
    """``torch.float16``, ``"torch.float16"``, ``"float16"`` and ``"f16"`` -> ``f16``."""
    if isinstance(dtype, str):
        attr = getattr(torch, dtype.removeprefix("torch."), None)
        if not isinstance(attr, torch.dtype):
            return dtype
        dtype = attr
    return NAME_BY_DTYPE.get(dtype, str(dtype).replace("torch.", ""))


_PEAKS: dict[str, Peaks] = {}


def _device_key(dev: torch.device) -> tuple[str, str]:
    if dev.type == "cuda":
        name = torch.cuda.get_device_name(dev)
    else:
        import platform

        name = f"cpu-{platform.machine()}-{os.cpu_count()}"
    key = f"{name}-torch{torch.__version__}".replace(" ", "_").replace("/", "_")
    return name, key


def measure_peaks(device: str | torch.device, *, use_cache: bool = True) -> Peaks:
    """Copy bandwidth and matmul rates of ``device``, measured once and cached.

    Cached in memory and as JSON under ``OPBENCH_CACHE_DIR`` (default
    ``~/.cache/opbench``), keyed by device name and torch version. Bandwidth counts bytes
    read plus bytes written of a large device-to-device copy; matmul rates are square
    products of random data (f16, bf16, f32 without and with TF32, f64).
    """
    dev = torch.device(device)
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    name, key = _device_key(dev)
    if key in _PEAKS:
        return _PEAKS[key]
    path = cache_dir() / f"peaks-{key}.json"
    if use_cache and path.exists():
        try:
            peaks = Peaks(**json.loads(path.read_text()))
            _PEAKS[key] = peaks
            return peaks
        except (ValueError, TypeError) as e:
            log.warning("ignoring unreadable peaks cache %s: %s", path, e)
    peaks = _measure(dev, name)
    _PEAKS[key] = peaks
    if use_cache:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(peaks.to_dict(), indent=1))
        except OSError as e:
            log.warning("could not write peaks cache %s: %s", path, e)
    return peaks


def _time_ms(fn: Any, dev: torch.device, reps: int) -> float:
    """Median time of ``fn()`` (ms): events on CUDA, wall clock on CPU."""
    fn()
    times = []
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
        for _ in range(reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            torch.cuda.synchronize(dev)
            times.append(a.elapsed_time(b))
    else:
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return sorted(times)[len(times) // 2]


def _measure(dev: torch.device, name: str) -> Peaks:
    cuda = dev.type == "cuda"
    g = torch.Generator(device="cpu").manual_seed(0)
    n_copy = (256 if cuda else 16) * 1024 * 1024  # float32 elements: 1 GiB / 64 MiB
    src = torch.rand(n_copy // 64, generator=g).repeat(64).to(dev)
    dst = torch.empty_like(src)
    ms = _time_ms(lambda src=src, dst=dst: dst.copy_(src), dev, 20 if cuda else 5)
    bandwidth = 2 * src.numel() * src.element_size() / (ms / 1e3)
    del src, dst
    rates: dict[str, float] = {}
    sizes = (
        {"f16": 8192, "bf16": 8192, "f32": 4096, "tf32": 8192, "f64": 4096}
        if cuda
        else {"f32": 512, "f64": 384}
    )
    dtypes = {
        "f16": torch.float16,
        "bf16": torch.bfloat16,
        "f32": torch.float32,
        "tf32": torch.float32,
        "f64": torch.float64,
    }
    for label, n in sizes.items():
        dt = dtypes[label]
        a = torch.randn(n, n, generator=g).to(dev, dt)
        b = torch.randn(n, n, generator=g).to(dev, dt)
        prev = torch.backends.cuda.matmul.allow_tf32
        try:
            torch.backends.cuda.matmul.allow_tf32 = label == "tf32"
            ms = _time_ms(lambda a=a, b=b: torch.mm(a, b), dev, 10 if cuda else 3)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = prev
        rates[label] = 2 * n**3 / (ms / 1e3)
        del a, b
    l2 = 0
    if cuda:
        l2 = int(getattr(torch.cuda.get_device_properties(dev), "L2_cache_size", 0) or 0)
    return Peaks(
        bandwidth_Bps=bandwidth,
        matmul_flops=rates,
        l2_bytes=l2,
        device_name=name,
        note="measured by opbench.judge.roofline.measure_peaks",
    )
