"""What a timing means: speedups, the side-stream correction and the canary flags,
derived from a worker's raw measurements.

Runs in the HARNESS (and in-process, for the self-test and benchmarks that call
:func:`opbench.instrument.timing.time_pair` directly). The worker measures and sends
medians, spreads, the side-stream probe's raw times, the synced times, the launch floor
and whether the shared inputs changed; it never sends a flag or a speedup, and whatever
a message carries under those names is ignored: every value here is recomputed from the
measurements, one code path for operator and program runs.

Rules (each published with its threshold):

* ``speedup_device``: reference over candidate device-time median; when the candidate is
  a side-stream suspect and synced times were measured, the smaller of that and the
  synced ratio (work finishing after the stop event cannot make a kernel look faster).
* ``side_stream_suspect``: the candidate's ``wall - event`` on an idle GPU exceeds the
  reference's by more than :data:`SIDE_STREAM_TOL_US` or :data:`SIDE_STREAM_TOL_SHARE`
  of the reference's event time, whichever is larger.
* ``overhead_dominated``: either side's device time within :data:`OVERHEAD_FACTOR` of the
  launch floor (the published BackendBench rule); ``host_bound`` / ``ref_host_bound``:
  host-inclusive time above :data:`HOST_BOUND_FACTOR` times device time.
* ``noisy``: either median's relative standard error above the run's target.
* ``mutates_input``: the shared inputs changed though neither side declared a write.
* ``device_time_may_include_host``: the spin kernel hit its 2 ms cap (host launches
  slower than that may leak into device time).
"""

from __future__ import annotations

import math
from typing import Any

__all__ = [
    "HOST_BOUND_FACTOR",
    "OVERHEAD_FACTOR",
    "SIDE_STREAM_TOL_SHARE",
    "SIDE_STREAM_TOL_US",
    "derive",
    "side_stream_tolerance_us",
]

#: Canary thresholds (the published BackendBench rule uses 1.3 for both).
OVERHEAD_FACTOR = 1.3
HOST_BOUND_FACTOR = 1.3
SIDE_STREAM_TOL_US = 3.0
SIDE_STREAM_TOL_SHARE = 0.1
SLEEP_CAP_US = 2000.0


def _pos(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and math.isfinite(x) and x > 0 else None


def side_stream_tolerance_us(ref_event_us: float) -> float:
    """The excess ``wall - event`` (us) beyond which a candidate is a side-stream suspect."""
    return max(SIDE_STREAM_TOL_US, SIDE_STREAM_TOL_SHARE * ref_event_us)


def derive(t: dict[str, Any]) -> dict[str, Any]:
    """Speedups and flags from raw measurements (:class:`~opbench.instrument.timing.
    PairTiming`'s fields). Keys: ``speedup_device``, ``event_speedup_device``,
    ``speedup_host``, ``speedup_graph``, ``relative_runtime_to_kernel_launch``,
    ``cand_relative_runtime_to_kernel_launch`` (None where the inputs are unusable) and
    ``flags`` (sorted)."""
    flags: set[str] = set()
    ref_dev, cand_dev = _pos(t.get("ref_device_ms")), _pos(t.get("cand_device_ms"))
    ref_host, cand_host = _pos(t.get("ref_host_ms")), _pos(t.get("cand_host_ms"))
    event = ref_dev / cand_dev if ref_dev and cand_dev else None
    speedup = event
    side = t.get("side_stream")
    if isinstance(side, dict) and _pos(side.get("ref_event_us")) is not None:
        delta = side.get("delta_us")
        if isinstance(delta, (int, float)) and delta > side_stream_tolerance_us(
            float(side["ref_event_us"])
        ):
            flags.add("side_stream_suspect")
            synced = t.get("synced") or {}
            s_ref, s_cand = _pos(synced.get("ref_ms")), _pos(synced.get("cand_ms"))
            if s_ref and s_cand and speedup is not None:
                speedup = min(speedup, s_ref / s_cand)
            elif speedup is not None:
                speedup = None  # a suspect without synced times is not timed
                flags.add("untimed")
    floor = _pos(t.get("launch_floor_ms"))
    rel_ref = ref_dev / floor if ref_dev and floor else None
    rel_cand = cand_dev / floor if cand_dev and floor else None
    if rel_ref is not None and rel_cand is not None:
        if rel_ref <= OVERHEAD_FACTOR or rel_cand <= OVERHEAD_FACTOR:
            flags.add("overhead_dominated")
    if cand_host and cand_dev and cand_host > HOST_BOUND_FACTOR * cand_dev:
        flags.add("host_bound")
    if ref_host and ref_dev and ref_host > HOST_BOUND_FACTOR * ref_dev:
        flags.add("ref_host_bound")
    target = _pos(t.get("rel_err_target"))
    ses = [t.get("ref_device_rel_se"), t.get("cand_device_rel_se")]
    if target and any(isinstance(s, (int, float)) and s > target for s in ses):
        flags.add("noisy")
    if t.get("inputs_changed"):
        flags.add("mutates_input")
    sleep = t.get("sleep_us")
    if isinstance(sleep, (int, float)) and sleep >= SLEEP_CAP_US:
        flags.add("device_time_may_include_host")
    g_ref, g_cand = _pos(t.get("ref_graph_ms")), _pos(t.get("cand_graph_ms"))
    return {
        "speedup_device": speedup,
        "event_speedup_device": event,
        "speedup_host": ref_host / cand_host if ref_host and cand_host else None,
        "speedup_graph": g_ref / g_cand if g_ref and g_cand else None,
        "relative_runtime_to_kernel_launch": rel_ref,
        "cand_relative_runtime_to_kernel_launch": rel_cand,
        "flags": sorted(flags),
    }
