"""The report's charts as inline SVG: no script, no external asset, so ``report.html``
opens offline and prints. Speedups are drawn on a log2 axis (0.5x and 2x are equally
far from 1x); every mark carries a ``<title>`` tooltip with its exact value.

* :func:`speedup_histogram`: how the tests' device-time speedups are distributed;
* :func:`per_op_speedups`: each operator's geomean with the range of its tests;
* :func:`speedup_vs_roofline`: each test's speedup against the fraction of the
  hardware's speed of light its kernel reached (what is left to gain).
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

from opbench.report.means import geomean

__all__ = ["per_op_speedups", "speedup_histogram", "speedup_vs_roofline"]

_W = 640
_PAD_L, _PAD_R, _PAD_T, _PAD_B = 56, 16, 28, 36
_LO, _HI = 1 / 16, 16.0  # the speedup axis, clamped


def _e(x: object) -> str:
    return html.escape(str(x), quote=True)


def _clamp(v: float) -> float:
    return min(max(v, _LO), _HI)


def _frame(title: str, height: int, body: list[str], note: str = "") -> str:
    cap = f"<text x='{_PAD_L}' y='16' class='ct'>{_e(title)}</text>"
    if note:
        cap += f"<text x='{_W - _PAD_R}' y='16' class='cn' text-anchor='end'>{_e(note)}</text>"
    return (
        f"<svg class='chart' role='img' aria-label='{_e(title)}' viewBox='0 0 {_W} {height}' "
        f"width='{_W}' height='{height}' xmlns='http://www.w3.org/2000/svg'>{cap}"
        + "".join(body)
        + "</svg>"
    )


def _empty(title: str, why: str) -> str:
    return _frame(title, 60, [f"<text x='{_PAD_L}' y='44' class='cn'>{_e(why)}</text>"])


def _log_x(v: float, left: float = _PAD_L) -> float:
    """Screen x of speedup ``v`` on the log2 axis starting at ``left``."""
    span = math.log2(_HI) - math.log2(_LO)
    return left + (math.log2(_clamp(v)) - math.log2(_LO)) / span * (_W - left - _PAD_R)


def _x_axis(y: float, top: float, left: float = _PAD_L) -> list[str]:
    out = [f"<line x1='{left}' y1='{y}' x2='{_W - _PAD_R}' y2='{y}' class='ax'/>"]
    for v in (1 / 16, 1 / 4, 1 / 2, 1, 2, 4, 16):
        x = _log_x(v, left)
        label = f"{v:g}x" if v >= 1 else f"1/{round(1 / v)}x"
        out.append(f"<text x='{x:.1f}' y='{y + 14}' class='tl' text-anchor='middle'>{label}</text>")
        cls = "one" if v == 1 else "grid"
        out.append(f"<line x1='{x:.1f}' y1='{top}' x2='{x:.1f}' y2='{y}' class='{cls}'/>")
    return out


def speedup_histogram(speedups: Sequence[float], title: str = "speedup over eager") -> str:
    """Tests per speedup bin (quarter-octave bins, clamped to 1/16x..16x)."""
    vals = [v for v in speedups if v and v > 0 and math.isfinite(v)]
    if not vals:
        return _empty(title, "no timed tests (--no-perf, or none correct)")
    lo2 = math.log2(_LO)
    nb = int((math.log2(_HI) - lo2) * 4)
    counts = [0] * nb
    for v in vals:
        counts[min(nb - 1, int((math.log2(_clamp(v)) - lo2) * 4))] += 1
    h = 220
    base = h - _PAD_B
    top = _PAD_T
    peak = max(counts)
    body: list[str] = []
    for i, c in enumerate(counts):
        if not c:
            continue
        a, b = 2 ** (lo2 + i / 4), 2 ** (lo2 + (i + 1) / 4)
        x0, x1 = _log_x(a), _log_x(b)
        bh = (base - top) * c / peak
        cls = "bar good" if a >= 1 else "bar"
        body.append(
            f"<rect x='{x0 + 0.5:.1f}' y='{base - bh:.1f}' width='{max(x1 - x0 - 1, 1):.1f}' "
            f"height='{bh:.1f}' class='{cls}'><title>{c} tests in {a:.3g}x-{b:.3g}x</title></rect>"
        )
    body += _x_axis(base, top)
    body.append(f"<text x='{_PAD_L - 6}' y='{top + 8}' class='tl' text-anchor='end'>{peak}</text>")
    gm = geomean(vals)
    return _frame(title, h, body, f"{len(vals)} tests, geomean {gm:.3f}x")


def per_op_speedups(
    rows: Sequence[tuple[str, float, float, float]], title: str = "per-operator speedup"
) -> str:
    """``(op, geomean, lowest test, highest test)`` per operator, slowest first."""
    rows = [r for r in rows if r[1] and r[1] > 0]
    if not rows:
        return _empty(title, "no timed operators")
    rows = sorted(rows, key=lambda r: r[1])
    step = 16
    left = 210  # room for the operator names
    h = _PAD_T + step * len(rows) + _PAD_B
    base = h - _PAD_B
    body: list[str] = []
    for i, (op, gm, lo, hi) in enumerate(rows):
        y = _PAD_T + step * i + step / 2
        short = op.removeprefix("aten.")
        short = short if len(short) <= 34 else "…" + short[-33:]
        body.append(
            f"<text x='{left - 6}' y='{y + 4:.1f}' class='tl op' text-anchor='end'>"
            f"{_e(short)}</text>"
        )
        body.append(
            f"<line x1='{_log_x(lo, left):.1f}' y1='{y:.1f}' x2='{_log_x(hi, left):.1f}' "
            f"y2='{y:.1f}' class='whisker'/>"
        )
        cls = "dot good" if gm >= 1 else "dot"
        body.append(
            f"<circle cx='{_log_x(gm, left):.1f}' cy='{y:.1f}' r='4' class='{cls}'><title>"
            f"{_e(op)}: {gm:.3f}x (tests {lo:.3f}x-{hi:.3f}x)</title></circle>"
        )
    body += _x_axis(base, _PAD_T, left)
    return _frame(title, h, body, f"{len(rows)} operators, line: range of their tests")


def speedup_vs_roofline(
    points: Sequence[tuple[float, float, str]], title: str = "speedup against roofline"
) -> str:
    """``(fraction of speed of light, speedup, label)`` per test: x linear 0..1."""
    pts = [p for p in points if p[0] is not None and p[1] and p[1] > 0 and math.isfinite(p[0])]
    if not pts:
        return _empty(title, "no test has a roofline estimate (timed tests of modelled ops)")
    h = 260
    base, top = h - _PAD_B, _PAD_T
    span = math.log2(_HI) - math.log2(_LO)

    def sx(f: float) -> float:
        return _PAD_L + min(max(f, 0.0), 1.0) * (_W - _PAD_L - _PAD_R)

    def sy(v: float) -> float:
        return base - (math.log2(_clamp(v)) - math.log2(_LO)) / span * (base - top)

    body = [f"<line x1='{_PAD_L}' y1='{base}' x2='{_W - _PAD_R}' y2='{base}' class='ax'/>"]
    for f in (0, 0.25, 0.5, 0.75, 1.0):
        body.append(
            f"<text x='{sx(f):.1f}' y='{base + 14}' class='tl' text-anchor='middle'>{f:.0%}</text>"
        )
    for v in (1 / 4, 1, 4):
        cls = "one" if v == 1 else "grid"
        body.append(
            f"<line x1='{_PAD_L}' y1='{sy(v):.1f}' x2='{_W - _PAD_R}' y2='{sy(v):.1f}' "
            f"class='{cls}'/><text x='{_PAD_L - 4}' y='{sy(v) + 4:.1f}' class='tl' "
            f"text-anchor='end'>{v:g}x</text>"
        )
    for f, v, label in pts:
        cls = "dot good" if v >= 1 else "dot"
        body.append(
            f"<circle cx='{sx(f):.1f}' cy='{sy(v):.1f}' r='3' class='{cls}'><title>"
            f"{_e(label)}: {v:.3f}x at {f:.0%} of speed of light</title></circle>"
        )
    body.append(
        f"<text x='{_W - _PAD_R}' y='{h - 4}' class='tl' text-anchor='end'>"
        "fraction of speed of light (x) · speedup, log scale (y)</text>"
    )
    return _frame(title, h, body, f"{len(pts)} tests")
