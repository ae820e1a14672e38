"""The CUDA environment of the device-time protocol: flush, sleep, persisting L2.

Owns the per-device state the timing loops (:mod:`opbench.instrument.timing_loops`) use
before every repetition: a buffer of 4x the L2 size to overwrite (cold L2), the
``torch.cuda._sleep`` calibration (cycles per microsecond, so a spin kernel can keep the
GPU busy while the host queues a call), the persisting-L2 reset (through ``cuda.bindings``
or the ``libcudart`` torch loaded) and the event pool. One :class:`CudaEnv` per device,
made on first use (:func:`env_for`). Clocks come from :mod:`opbench.instrument.clocks`.
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys
from typing import Any

import torch

from opbench.instrument.clocks import Event as _Event
from opbench.instrument.clocks import cuda_sleep as _cuda_sleep
from opbench.instrument.clocks import cuda_sync as _cuda_sync
from opbench.instrument.clocks import current_stream as _current_stream
from opbench.instrument.clocks import event_elapsed as _ev_elapsed
from opbench.instrument.clocks import event_record as _ev_record

__all__ = ["CudaEnv", "env_for", "reset_persisting_l2", "sleep_cycles"]


class CudaEnv:
    """Per-device state: the flush buffer, the sleep calibration, the L2 facts."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        props = torch.cuda.get_device_properties(device)
        self.name = props.name
        l2 = int(getattr(props, "L2_cache_size", 0) or 0)
        self.l2_bytes = l2 if l2 > 0 else 64 * 1024 * 1024
        self.flush_bytes = int(min(max(4 * self.l2_bytes, 64 * 1024 * 1024), 1024**3))
        self.flush_buf = torch.empty(self.flush_bytes // 4, dtype=torch.int32, device=device)
        self.persisting_l2 = reset_persisting_l2()
        self.cycles_per_us = self._calibrate_sleep()
        self.events: list[Any] = []

    def _calibrate_sleep(self) -> float:
        if _cuda_sleep is None:
            return 0.0
        stream = _current_stream(self.device)
        cycles = 1_000_000
        times = []
        for _ in range(4):
            a, b = _Event(enable_timing=True), _Event(enable_timing=True)
            _ev_record(a, stream)
            _cuda_sleep(cycles)
            _ev_record(b, stream)
            _cuda_sync(self.device)
            times.append(_ev_elapsed(a, b) * 1000.0)
        us = sorted(times)[len(times) // 2]
        return cycles / us if us > 0 else 0.0

    def event_pairs(self, n: int) -> list[Any]:
        while len(self.events) < 2 * n:
            self.events.append(_Event(enable_timing=True))
        return self.events

    def prepare(self, flush: bool, sleep_cycles: int) -> None:
        """Before one repetition: evict L2, then keep the GPU busy while the host queues."""
        if flush:
            self.flush_buf.fill_(1)  # same work every time, never zeros
        if sleep_cycles > 0 and _cuda_sleep is not None:
            _cuda_sleep(sleep_cycles)


_ENVS: dict[str, CudaEnv] = {}


def env_for(device: torch.device) -> CudaEnv:
    key = str(device)
    if key not in _ENVS:
        _ENVS[key] = CudaEnv(device)
    return _ENVS[key]


_CUDA_LIMIT_PERSISTING_L2 = 0x06


def reset_persisting_l2() -> str:
    """Set the persisting-L2 limit to 0 and drop persisting lines (best effort).

    PyTorch has no API for it; the CUDA runtime is reached through ``cuda.bindings``
    or the ``libcudart`` already loaded by torch. Returns what happened, for the record.
    """
    try:
        from cuda.bindings import runtime as rt  # type: ignore[import-not-found]

        (e1,) = rt.cudaDeviceSetLimit(rt.cudaLimit.cudaLimitPersistingL2CacheSize, 0)
        (e2,) = rt.cudaCtxResetPersistingL2Cache()
        ok = rt.cudaError_t.cudaSuccess
        return "reset (cuda.bindings)" if e1 == ok and e2 == ok else f"failed ({e1}, {e2})"
    except Exception:  # noqa: BLE001 - optional dependency, any failure means "try next"
        pass
    for lib in _cudart_candidates():
        try:
            set_limit = lib.cudaDeviceSetLimit
            reset = lib.cudaCtxResetPersistingL2Cache
        except AttributeError:
            continue
        set_limit.argtypes = [ctypes.c_int, ctypes.c_size_t]
        set_limit.restype = ctypes.c_int
        reset.argtypes = []
        reset.restype = ctypes.c_int
        rc1 = set_limit(_CUDA_LIMIT_PERSISTING_L2, 0)
        rc2 = reset()
        return "reset (libcudart)" if rc1 == 0 and rc2 == 0 else f"failed (rc {rc1}, {rc2})"
    return "unavailable (no CUDA runtime entry point found)"


def _cudart_candidates() -> list[Any]:
    libs: list[Any] = []
    try:
        libs.append(ctypes.CDLL(None))
    except OSError:
        pass
    roots = [os.path.dirname(torch.__file__)] + [p for p in sys.path if p]
    seen: set[str] = set()
    for root in roots:
        for pattern in (
            "lib/libcudart.so*",
            "nvidia/*/lib/libcudart.so*",
            "nvidia/cu*/lib/libcudart.so*",
        ):
            for path in sorted(glob.glob(os.path.join(root, pattern))):
                if path in seen:
                    continue
                seen.add(path)
                try:
                    libs.append(ctypes.CDLL(path))
                except OSError:
                    continue
    return libs


def sleep_cycles(env: CudaEnv, us: float) -> int:
    """The ``torch.cuda._sleep`` cycles that spin for ``us`` microseconds (0: no sleep)."""
    return int(env.cycles_per_us * us) if env.cycles_per_us > 0 else 0
