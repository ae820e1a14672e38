"""Roofline: what a test must move and compute, against what the device can do.

For every test, :func:`work_of` counts the bytes it must read and write and the
floating-point operations it must do; :func:`measure_peaks` measures the device's copy
bandwidth and matmul rate once (cached on disk per device and torch version); and
:func:`roofline` turns a measured time into achieved bandwidth, FLOP/s and the fraction
of speed-of-light. :func:`cheat_check` flags a time that the memory system cannot have
delivered.

The counting rules are :mod:`opbench.judge.roofline_work`'s (:func:`work_of`), the
measured peaks :mod:`opbench.judge.roofline_peaks`'s (:func:`measure_peaks`); this
module owns the two rules that use them, :func:`roofline` and :func:`cheat_check`, and
re-exports both modules' public names.

The cheat rule (:func:`cheat_check`): with L2 flushed before every repetition, every
input byte must come from device memory, but outputs up to the L2 size can stay in
cache until after the stop event. The floor is therefore
``(read + max(0, written - L2)) / bandwidth``, and a device time below ``margin``
(default 0.5) times that floor is flagged; FLOPs give a second floor,
``flops / matmul_rate`` (the fastest measured rate for the dtype), with the same margin.
"""

from __future__ import annotations

import math

import torch

from opbench.judge.roofline_peaks import Peaks, dtype_name, measure_peaks
from opbench.judge.roofline_work import Work, unique_bytes, work_of

__all__ = [
    "CHEAT_MARGIN",
    "Peaks",
    "Work",
    "cheat_check",
    "dtype_name",
    "measure_peaks",
    "roofline",
    "unique_bytes",
    "work_of",
]

#: A time below this fraction of the memory (or FLOP) floor is flagged as a cheat.
CHEAT_MARGIN = 0.5


# --------------------------------------------------------------------------- roofline


def roofline(
    work: Work, time_ms: float, peaks: Peaks, dtype: str | torch.dtype | None = None
) -> dict[str, float]:
    """Achieved bandwidth and FLOP/s, the speed-of-light floor and the fraction reached.

    ``floor_ms`` is the larger of bytes / bandwidth and flops / matmul rate;
    ``sol_fraction`` = floor / time (1.0 = at the roofline).
    """
    seconds = time_ms / 1e3 if time_ms > 0 else math.nan
    bw_ms = work.bytes / peaks.bandwidth_Bps * 1e3 if peaks.bandwidth_Bps > 0 else 0.0
    rate = peaks.flops_for(dtype)
    fl_ms = work.flops / rate * 1e3 if work.flops and rate and not math.isnan(rate) else 0.0
    floor_ms = max(bw_ms, fl_ms)
    return {
        "achieved_Bps": work.bytes / seconds if seconds == seconds else math.nan,
        "achieved_flops": work.flops / seconds if seconds == seconds else math.nan,
        "floor_ms": floor_ms,
        "bound": "flops" if fl_ms > bw_ms else "bytes",
        "sol_fraction": floor_ms / time_ms if time_ms > 0 else math.nan,
    }


def cheat_check(
    work: Work,
    time_ms: float,
    peaks: Peaks,
    margin: float = CHEAT_MARGIN,
    dtype: str | torch.dtype | None = None,
) -> str | None:
    """A reason when ``time_ms`` is impossible for the memory system (or matmul units).

    The memory floor counts every byte read (inputs come from memory after the L2
    flush) plus the written bytes beyond the L2 size (outputs that fit can stay in cache
    past the stop event). Flagged below ``margin`` times the floor.
    """
    if time_ms <= 0 or not math.isfinite(time_ms):
        return f"non-positive or infinite time {time_ms!r} ms"
    compulsory = work.read_bytes + max(0, work.write_bytes - peaks.l2_bytes)
    if not work.read_bytes and not work.write_bytes:
        compulsory = max(0, work.bytes - peaks.l2_bytes)
    if peaks.bandwidth_Bps > 0 and compulsory > 0:
        floor_ms = compulsory / peaks.bandwidth_Bps * 1e3
        if time_ms < margin * floor_ms:
            return (
                f"{time_ms * 1e3:.2f} us is under {margin:g}x the memory floor "
                f"{floor_ms * 1e3:.2f} us ({compulsory} compulsory bytes at "
                f"{peaks.bandwidth_Bps / 1e9:.0f} GB/s)"
            )
    rate = peaks.flops_for(dtype)
    if work.flops and rate and math.isfinite(rate):
        floor_ms = work.flops / rate * 1e3
        if time_ms < margin * floor_ms:
            return (
                f"{time_ms * 1e3:.2f} us is under {margin:g}x the compute floor "
                f"{floor_ms * 1e3:.2f} us ({work.flops} flops at {rate / 1e12:.1f} TFLOP/s)"
            )
    return None
