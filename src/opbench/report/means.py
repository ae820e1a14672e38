"""Geometric means of speedups: the one definition the reports, the judge's self-test and
the benchmark scripts share (each script had kept its own, and they differed in what they
did with a zero, a missing timing or an infinity). The serve policy keeps a copy of
:func:`geomean_of_timed`: it is packaged into backends that run without opbench.

Two, because a speedup list means one of two things:

* :func:`geomean`: every value is a measurement. A zero, a negative, NaN or an infinity
  is a timing bug upstream, not a number to average, so it raises.
* :func:`geomean_of_timed`: a table's column where a row that was not timed (failed,
  skipped, declined) is recorded as ``None``, 0 or NaN: the mean of the positive finite
  values, ``None`` when there are none. The callers say in their output which rows the
  mean is over.

A leaf module (no opbench imports), so the judge's worker can import it for its
self-test without the report's dependencies.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

__all__ = ["geomean", "geomean_of_timed"]


def geomean(values: Iterable[float]) -> float | None:
    """Geometric mean computed in log space (no overflow for large products); ``None``
    for no values; raises ``ValueError`` on a value that is not positive and finite."""
    vals = list(values)
    if not vals:
        return None
    for v in vals:
        if not (v > 0 and math.isfinite(v)):
            raise ValueError(f"geomean needs positive finite values, got {v!r}")
    return math.exp(math.fsum(math.log(v) for v in vals) / len(vals))


def geomean_of_timed(values: Iterable[float | None]) -> float | None:
    """:func:`geomean` over the positive finite values of ``values`` (the timed rows of a
    column); ``None`` if there are none."""
    return geomean(v for v in values if v is not None and v > 0 and math.isfinite(v))
