"""Comparing two runs test by test: which changes are real.

The rule (stated in ``opbench compare --help`` and the README): a timed test's speedup
changed *significantly* when it moved by more than :data:`MIN_CHANGE` (2%) **and** the
two runs' intervals ``speedup x (1 +- 2 x speedup_rel_err)`` do not overlap.
``speedup_rel_err`` is the 1-sigma relative error of the speedup that the timing
protocol records from each test's repetitions (the spread of both sides' samples), so a
change inside either run's own noise never counts, however large it looks. A test that
passed in A and fails in B (or the reverse) always counts.

An operator regresses when it was correct in A and is not in B, or when its speedup
dropped by more than the ``--threshold`` and at least one of its tests slowed down
significantly (with no per-test data, for runs whose ``results.sqlite`` is gone, the
threshold alone decides).
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opbench.run.store import ResultStore, TestResult

__all__ = ["MIN_CHANGE", "TestChange", "compare_tests", "op_regressions", "render_html"]

#: Smallest relative speedup change that can count as significant.
MIN_CHANGE = 0.02
#: Width of each run's interval, in standard errors of its speedup.
SIGMAS = 2.0


@dataclass
class TestChange:
    test_id: str
    op: str
    args: str
    status_a: str
    status_b: str
    speedup_a: float | None
    speedup_b: float | None
    rel_change: float | None  # speedup_b / speedup_a - 1
    significant: bool
    why: str


def _results(run_dir: Path) -> dict[str, TestResult] | None:
    db = Path(run_dir) / "results.sqlite"
    if not db.exists():
        return None
    store = ResultStore(db)
    try:
        return {r.test_id: r for r in store.results()}
    finally:
        store.close()


def _rel_err(r: TestResult) -> float:
    t = r.timing or {}
    e = t.get("speedup_rel_err")
    return float(e) if isinstance(e, (int, float)) and e == e else 0.0


def _interval(s: float, rel_err: float) -> tuple[float, float]:
    return s * (1 - SIGMAS * rel_err), s * (1 + SIGMAS * rel_err)


def compare_tests(run_a: Path, run_b: Path) -> list[TestChange] | None:
    """Every test in both runs whose verdict or timing changed (significant or not);
    None when either run has no per-test results."""
    a, b = _results(run_a), _results(run_b)
    if a is None or b is None:
        return None
    out: list[TestChange] = []
    for tid in sorted(set(a) & set(b)):
        ra, rb = a[tid], b[tid]
        if (ra.status == "passed") != (rb.status == "passed"):
            out.append(
                TestChange(tid, ra.op, ra.args, ra.status, rb.status, ra.speedup, rb.speedup,
                           None, True, f"{ra.category or ra.status} -> {rb.category or rb.status}")
            )  # fmt: skip
            continue
        if not (ra.speedup and rb.speedup):
            continue
        rel = rb.speedup / ra.speedup - 1
        lo_a, hi_a = _interval(ra.speedup, _rel_err(ra))
        lo_b, hi_b = _interval(rb.speedup, _rel_err(rb))
        apart = hi_b < lo_a or hi_a < lo_b
        significant = abs(rel) > MIN_CHANGE and apart
        why = (
            f"{rel:+.1%}, outside both runs' noise"
            if significant
            else f"{rel:+.1%}, within noise"
            if abs(rel) > MIN_CHANGE
            else f"{rel:+.1%}, under {MIN_CHANGE:.0%}"
        )
        out.append(
            TestChange(tid, ra.op, ra.args, ra.status, rb.status, ra.speedup, rb.speedup, rel,
                       significant, why)
        )  # fmt: skip
    return out


def op_regressions(
    a: dict[str, Any],
    b: dict[str, Any],
    changes: list[TestChange] | None,
    threshold: float,
) -> list[str]:
    """The operators that regress from summary ``a`` to ``b`` (see the module rule)."""
    slowed = {
        f"aten.{c.op}"
        for c in changes or []
        if c.significant and c.rel_change is not None and c.rel_change < 0
    }
    out = []
    for op in sorted(set(a["ops"]) | set(b["ops"])):
        va, vb = a["ops"].get(op, {}), b["ops"].get(op, {})
        if va.get("correct") and not vb.get("correct"):
            out.append(f"{op}: correct -> not correct")
            continue
        sa, sb = va.get("speedup"), vb.get("speedup")
        if sa and sb and sb / sa - 1 < -threshold:
            if changes is None or op in slowed:
                out.append(f"{op}: speedup {sa:.3f} -> {sb:.3f}")
    return out


def render_html(
    a: dict[str, Any], b: dict[str, Any], changes: list[TestChange] | None, regressions: list[str]
) -> str:
    """A self-contained page: the operators side by side, then every changed test."""
    e = html.escape
    rows = []
    for op in sorted(set(a["ops"]) | set(b["ops"])):
        va, vb = a["ops"].get(op, {}), b["ops"].get(op, {})
        sa, sb = va.get("speedup"), vb.get("speedup")
        change = f"{sb / sa - 1:+.1%}" if sa and sb else ""
        bad = any(line.startswith(f"{op}:") for line in regressions)
        rows.append(
            f"<tr class='{'bad' if bad else ''}'><td><code>{e(op)}</code></td>"
            f"<td>{va.get('correct', '-')}</td><td>{vb.get('correct', '-')}</td>"
            f"<td>{'-' if sa is None else f'{sa:.3f}'}</td>"
            f"<td>{'-' if sb is None else f'{sb:.3f}'}</td><td>{change}</td></tr>"
        )
    tests = [
        f"<tr class='{'bad' if c.significant and (c.rel_change or -1) < 0 else ''}'>"
        f"<td><code>{e(c.test_id)}</code></td><td><code>{e(c.op)}</code></td>"
        f"<td><code>{e(c.args[:200])}</code></td><td>{e(c.status_a)}</td><td>{e(c.status_b)}</td>"
        f"<td>{'-' if c.speedup_a is None else f'{c.speedup_a:.3f}'}</td>"
        f"<td>{'-' if c.speedup_b is None else f'{c.speedup_b:.3f}'}</td>"
        f"<td>{'yes' if c.significant else 'no'}</td><td>{e(c.why)}</td></tr>"
        for c in sorted(changes or [], key=lambda c: (not c.significant, c.rel_change or 0))
    ]
    return "\n".join(
        [
            "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
            f"<title>opbench compare · {e(str(a.get('run_dir')))} vs {e(str(b.get('run_dir')))}"
            "</title><style>body{font:14px system-ui,sans-serif;margin:2em auto;max-width:1200px}"
            "table{border-collapse:collapse;width:100%;font-size:13px}td,th{border-bottom:1px "
            "solid #ddd;padding:3px 6px;text-align:left}tr.bad td{background:#ffebe9}</style>"
            "</head><body>",
            f"<h1>{e(str(a.get('run_dir')))} &rarr; {e(str(b.get('run_dir')))}</h1>",
            f"<p>Regressions: {len(regressions)}. Rule: {e(_RULE)}</p>",
            "<h2>Operators</h2><table><tr><th>op</th><th>correct A</th><th>correct B</th>"
            "<th>speedup A</th><th>speedup B</th><th>change</th></tr>",
            *rows,
            "</table>",
            f"<h2>Tests that changed ({len(changes or [])})</h2>"
            + ("" if changes is not None else "<p>No per-test results in one of the runs.</p>"),
            "<table><tr><th>test</th><th>op</th><th>inputs</th><th>status A</th>"
            "<th>status B</th><th>speedup A</th><th>speedup B</th><th>significant</th>"
            "<th>why</th></tr>",
            *tests,
            "</table>",
            f"<script type='application/json' id='regressions'>{e(json.dumps(regressions))}"
            "</script></body></html>",
        ]
    )


_RULE = (
    f"a test's speedup change is significant when it exceeds {MIN_CHANGE:.0%} and the runs' "
    f"intervals speedup x (1 +- {SIGMAS:g} x its relative standard error) do not overlap; "
    "an operator regresses when it stops being correct, or its speedup drops by more than "
    "the threshold with at least one significantly slower test."
)
