"""The shared geometric means: strict over measurements, and over a column's timed rows."""

from __future__ import annotations

import math

import pytest

from opbench.report import metrics
from opbench.report.means import geomean, geomean_of_timed


def test_geomean_is_strict() -> None:
    assert geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert geomean(iter([3.0])) == pytest.approx(3.0)
    assert geomean([]) is None
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="positive finite"):
            geomean([1.0, bad])
    assert metrics.geomean is geomean  # the report's name is the same function


def test_geomean_of_timed_skips_untimed_rows() -> None:
    assert geomean_of_timed([2.0, None, 0.0, 8.0, math.nan, -3.0, math.inf]) == pytest.approx(4.0)
    assert geomean_of_timed([None, 0.0]) is None
    assert geomean_of_timed([]) is None
    assert geomean_of_timed(x for x in (1e300, 1e300)) == pytest.approx(1e300)  # log space
