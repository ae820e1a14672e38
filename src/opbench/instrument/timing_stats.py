"""Timing options and the statistics of timed samples.

Owns :class:`TimingOptions` (how hard to time one test), :class:`Summary` and
:func:`summarize` (median, quartiles, the median's relative standard error) and
:func:`interpolated_median` (the median interpolated within tied groups, since CUDA events
tick at ~0.5 us). Pure functions of numbers: no torch, no device. Used by the timing loops
(:mod:`opbench.instrument.timing_loops`) and re-exported by :mod:`opbench.instrument.timing`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Summary", "TimingOptions", "interpolated_median", "summarize"]


@dataclass
class TimingOptions:
    """How hard to time one test. Defaults fit a whole traces suite (~0.3-0.5 s a test).

    ``budget_ms`` bounds the interleaved device-time phase (both sides together);
    ``host_budget_ms`` the host-inclusive rounds. ``host_calls`` is the number of
    back-to-back calls per round (None: enough for ~``host_round_ms``).
    ``rel_err_target`` is the relative standard error of each median at which the
    device phase stops early. ``flush_l2`` and ``sleep`` only apply to CUDA.
    """

    warmup_ms: float = 10.0
    min_reps: int = 20
    max_reps: int = 2000
    rel_err_target: float = 0.004
    budget_ms: float = 200.0
    host_calls: int | None = None
    host_rounds: int = 7
    host_round_ms: float = 2.0
    host_budget_ms: float = 60.0
    cuda_graph: bool = False
    graph_replays: int = 50
    flush_l2: bool = True
    sleep: bool = True
    side_stream_check: bool = True
    side_stream_reps: int = 12
    pool_bytes: int = 512 * 1024 * 1024  # at most this much for host-round input copies
    #: inputs up to this size also get a second draw to alternate with (timing_inputs.py)
    alternate_max_bytes: int = 1 << 30


@dataclass
class Summary:
    """Statistics of one set of samples (ms). ``rel_se``: relative std-error of the median."""

    median: float
    q1: float
    q3: float
    iqr: float
    rel_iqr: float
    rel_se: float
    min: float
    n: int


def interpolated_median(xs: Sequence[float]) -> float:
    """The median, interpolated within the tie group at the middle.

    Event timers tick (~0.5 us documented): for a 4 us kernel, two identical sides can
    give medians one tick (12%) apart. For data on a lattice of step ``w`` the grouped
    median ``c - w/2 + w (n/2 - below) / f`` (``f`` values tied at ``c``, ``below``
    under it) is continuous; without ties it is the ordinary median. A neighbour
    farther than ``c/2`` is an outlier, not a tick: then the ordinary median.
    """
    s = sorted(xs)
    n = len(s)
    if n == 0:
        return math.nan
    plain = s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])
    if n < 3:
        return plain
    c = s[n // 2]
    eps = 1e-9 * abs(c) + 1e-15
    below = sum(1 for v in s if v < c - eps)
    f = sum(1 for v in s if abs(v - c) <= eps)
    if f < 3:
        return plain
    lower = [v for v in s if v < c - eps]
    upper = [v for v in s if v > c + eps]
    gaps = []
    if lower:
        gaps.append(c - lower[-1])
    if upper:
        gaps.append(upper[0] - c)
    if not gaps:
        return c
    w = min(gaps)
    if w > 0.5 * abs(c):
        return plain  # neighbours that far away are outliers, not timer ticks
    return c - w / 2 + w * (n / 2 - below) / f


def _quantile(s: Sequence[float], p: float) -> float:
    """Linear-interpolated quantile of sorted ``s`` (numpy's default)."""
    if not s:
        return math.nan
    pos = p * (len(s) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summarize(xs: Sequence[float]) -> Summary:
    """Median (interpolated for ties), quartiles and the median's relative std-error.

    ``rel_se`` uses the large-sample error of a median, 1.2533 sigma / sqrt(n), with
    sigma from the IQR (robust to outliers), floored by the tick size / sqrt(12).
    """
    s = sorted(float(x) for x in xs)
    n = len(s)
    if n == 0:
        nan = math.nan
        return Summary(nan, nan, nan, nan, nan, nan, nan, 0)
    med = interpolated_median(s)
    q1, q3 = _quantile(s, 0.25), _quantile(s, 0.75)
    iqr = q3 - q1
    distinct = sorted(set(s))
    tick = min((b - a for a, b in zip(distinct, distinct[1:])), default=0.0)
    sigma = max(iqr / 1.349, tick / math.sqrt(12))
    rel_se = (1.2533 * sigma / math.sqrt(n) / med) if med > 0 else math.inf
    rel_iqr = iqr / med if med > 0 else math.inf
    return Summary(med, q1, q3, iqr, rel_iqr, rel_se, s[0], n)
