"""A self-contained HTML report of a run (no scripts, no external assets)."""

from __future__ import annotations

import html
import json
from collections.abc import Iterable
from typing import Any

from opbench.report.settings import rows as settings_rows
from opbench.run.store import TestResult

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1200px;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{border-bottom:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f5f5f5;position:sticky;top:0}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.ok{color:#1a7f37;font-weight:600}.bad{color:#cf222e;font-weight:600}
.cards{display:flex;gap:1em;flex-wrap:wrap}.card{border:1px solid #ddd;border-radius:6px;padding:.6em 1em}
.card b{display:block;font-size:1.4em}pre{white-space:pre-wrap;margin:0;font-size:12px;max-height:12em;overflow:auto}
small{color:#666}
"""


def _e(x: Any) -> str:
    return html.escape("" if x is None else str(x))


def _num(x: Any, spec: str = ".3f") -> str:
    return "–" if x is None else format(x, spec)


def render(
    summary: dict[str, Any], results: Iterable[TestResult], *, max_failures: int = 500
) -> str:
    """The report page for ``summary`` and the run's test results."""
    results = list(results)
    cards = [
        (
            "correctness",
            _num(summary.get("correctness_score")),
            f"{summary.get('ops_correct')}/{summary.get('ops_in_denominator')} ops",
        ),
        (
            "performance (device)",
            _num(summary.get("performance_score")),
            f"geomean over {summary.get('performance_ops', 0)} ops",
        ),
        ("performance (host)", _num(summary.get("performance_score_host")), "host-inclusive"),
        ("tests", f"{summary['tests']['passed']}/{summary['tests']['total']}", "passed"),
    ]
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>opbench · {_e(summary['suite'])} · {_e(summary['backend'])}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>opbench: suite <code>{_e(summary['suite'])}</code>, backend "
        f"<code>{_e(summary['backend'])}</code> on {_e(summary['device'])}</h1>",
        "<div class='cards'>",
        *(
            f"<div class='card'>{_e(k)}<b>{_e(v)}</b><small>{_e(s)}</small></div>"
            for k, v, s in cards
        ),
        "</div>",
        f"<p><small>timer: {_e(summary.get('timer') or 'none (--no-perf)')} · sandbox: "
        f"{_e(summary.get('sandbox'))} · env: "
        f"{_e(json.dumps({k: v for k, v in (summary.get('env') or {}).items() if k != 'backend_settings'}, default=str))}"
        "</small></p>",
    ]
    settings = settings_rows(summary)
    if settings:
        parts.append(
            "<h2>Backend settings</h2><p><small>Read back in the workers where the "
            "reference and the candidate ran, at the start and the end of the run; "
            "<b>pinned</b> ones opbench sets for both sides (float32 in IEEE unless "
            "<code>--allow-tf32</code>), the rest are PyTorch's defaults.</small></p>"
            "<table><tr><th>setting</th><th>start</th><th>end</th><th></th></tr>"
        )
        parts += [
            f"<tr><td><code>{_e(k)}</code></td><td>{_e(v0)}</td>"
            f"<td class='{'' if v1 == v0 else 'bad'}'>{_e(v1)}</td>"
            f"<td>{'pinned' if pinned else ''}</td></tr>"
            for k, v0, v1, pinned in settings
        ]
        parts.append("</table>")
    fast = summary.get("fast_p") or {}
    if fast:
        parts.append("<h2>fast_p</h2><table><tr>")
        parts += [f"<th>p={_e(p)}</th>" for p in fast]
        parts.append("</tr><tr>")
        parts += [f"<td class='num'>{_num(v, '.2f')}</td>" for v in fast.values()]
        parts.append("</tr></table>")
    parts.append(
        "<h2>Operators</h2><table><tr><th>op</th><th>tests</th><th>passed</th><th>weak</th>"
        "<th>correct</th><th>speedup (device)</th><th>speedup (host)</th><th>failures</th></tr>"
    )
    for op, v in summary["ops"].items():
        ok = v.get("correct")
        parts.append(
            f"<tr><td><code>{_e(op)}</code></td><td class='num'>{v.get('tests', 0)}</td>"
            f"<td class='num'>{v.get('passed', 0)}</td><td class='num'>{v.get('weak', 0)}</td>"
            f"<td class='{'ok' if ok else 'bad'}'>{'yes' if ok else 'no'}</td>"
            f"<td class='num'>{_num(v.get('speedup'))}</td><td class='num'>{_num(v.get('speedup_host'))}</td>"
            f"<td>{_e(', '.join(f'{k}={n}' for k, n in (v.get('failures') or {}).items()))}</td></tr>"
        )
    parts.append("</table>")
    if summary.get("not_tested"):
        parts.append("<h2>Not tested</h2><table><tr><th>op</th><th>why</th></tr>")
        parts += [
            f"<tr><td><code>{_e(op)}</code></td><td>{_e(w)}</td></tr>"
            for op, w in summary["not_tested"].items()
        ]
        parts.append("</table>")
    failing = [r for r in results if r.status not in ("passed", "skipped")]
    if failing:
        parts.append(
            f"<h2>Failing tests ({len(failing)})</h2><p><small>Reproduce one with "
            "<code>opbench repro RUN_DIR TEST_ID</code>.</small></p><table><tr><th>test</th>"
            "<th>status</th><th>category</th><th>args</th><th>message</th></tr>"
        )
        for r in failing[:max_failures]:
            parts.append(
                f"<tr><td><code>{_e(r.test_id)}</code></td><td>{_e(r.status)}</td>"
                f"<td class='bad'>{_e(r.category)}</td><td><code>{_e(r.args[:200])}</code></td>"
                f"<td><pre>{_e(r.message[:2000])}</pre></td></tr>"
            )
        parts.append("</table>")
    parts.append("</body></html>")
    return "\n".join(parts)
