"""The run's report page: one self-contained HTML file (inline SVG charts and a small
inline script for sorting and filtering; no external asset, so it opens offline).

What a reader finds, top to bottom: the headline scores; the machine, the versions and
the backend settings the run pinned; three charts (speedup distribution, per-operator
speedup with its range, speedup against the roofline fraction); fast_p; the operators
(sortable); a correctness matrix (operator by dtype); every test in a sortable,
filterable table with its inputs, category, message and repro command; and each kernel
file's source beside the verdicts of the operators it serves, with the static scan's
findings, so a person can review what passed.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from opbench.report import charts
from opbench.report.metrics import sol_fraction
from opbench.report.settings import rows as settings_rows
from opbench.run.judge_errors import JUDGE_ERROR
from opbench.run.store import TestResult

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1200px;color:#222;padding:0 1em}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{border-bottom:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f5f5f5;position:sticky;top:0}
table.sortable th{cursor:pointer;user-select:none}table.sortable th:after{content:' \\2195';color:#bbb}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.ok{color:#1a7f37;font-weight:600}.bad{color:#cf222e;font-weight:600}.warn{color:#9a6700}
.cards{display:flex;gap:1em;flex-wrap:wrap}.card{border:1px solid #ddd;border-radius:6px;padding:.6em 1em}
.card b{display:block;font-size:1.4em}pre{white-space:pre-wrap;margin:0;font-size:12px;max-height:12em;overflow:auto}
pre.src{max-height:30em;background:#f8f8f8;padding:.5em;border:1px solid #eee}
small{color:#666}.charts{display:flex;flex-wrap:wrap;gap:1em}
svg.chart{border:1px solid #eee;border-radius:6px;background:#fff}
svg .ct{font-weight:600;font-size:13px}svg .cn,svg .tl{font-size:11px;fill:#666}
svg .ax{stroke:#999}svg .grid{stroke:#eee}svg .one{stroke:#888;stroke-dasharray:3 3}
svg .bar{fill:#d4a72c}svg .bar.good,svg .dot.good{fill:#2da44e}svg .dot{fill:#cf222e}
svg .whisker{stroke:#999;stroke-width:2}
td.m{text-align:center}td.m.all{background:#dafbe1}td.m.some{background:#fff8c5}td.m.none{background:#ffebe9}
.filters{margin:.5em 0;display:flex;gap:1em;align-items:center}
"""

_JS = """
function sortBy(th){const t=th.closest('table'),i=[...th.parentNode.children].indexOf(th);
const rows=[...t.querySelectorAll('tbody tr')],asc=th.dataset.dir!=='asc';
t.querySelectorAll('th').forEach(h=>delete h.dataset.dir);th.dataset.dir=asc?'asc':'desc';
const key=r=>{const c=r.children[i];const v=c?(c.dataset.v??c.textContent.trim()):'';
const n=parseFloat(v);return v!==''&&!isNaN(n)&&isFinite(v)?n:v.toLowerCase()};
rows.sort((a,b)=>{const x=key(a),y=key(b);const nx=typeof x==='number',ny=typeof y==='number';
const c=nx&&ny?x-y:nx?-1:ny?1:String(x).localeCompare(String(y));return asc?c:-c});
const body=t.querySelector('tbody');rows.forEach(r=>body.appendChild(r))}
document.querySelectorAll('table.sortable th').forEach(th=>th.addEventListener('click',()=>sortBy(th)));
function applyFilter(){const q=(document.getElementById('filter')||{}).value||'';
const st=(document.getElementById('status')||{}).value||'';const words=q.toLowerCase().split(/\\s+/).filter(Boolean);
let shown=0;document.querySelectorAll('#tests tbody tr').forEach(r=>{const text=r.textContent.toLowerCase();
const ok=words.every(w=>text.includes(w))&&(!st||r.dataset.status===st);r.style.display=ok?'':'none';if(ok)shown++});
const c=document.getElementById('shown');if(c)c.textContent=shown}
['filter','status'].forEach(id=>{const el=document.getElementById(id);if(el)el.addEventListener('input',applyFilter)});
"""

#: Tests listed in the page's table (a full run can hold tens of thousands).
MAX_TEST_ROWS = 5000
_DTYPE = re.compile(r"T\(\[[^\]]*\], (\w+)")


def _e(x: Any) -> str:
    return html.escape("" if x is None else str(x))


def _num(x: Any, spec: str = ".3f") -> str:
    return "–" if x is None else format(x, spec)


def dtype_of(args: str) -> str:
    """The dtype of a test's first tensor argument (trace format), or ``-``."""
    m = _DTYPE.search(args or "")
    return m.group(1) if m else "-"


def render(summary: dict[str, Any], results: Iterable[TestResult]) -> str:
    """The report page for ``summary`` and the run's test results."""
    results = list(results)
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>opbench · {_e(summary['suite'])} · {_e(summary['backend'])}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>opbench: suite <code>{_e(summary['suite'])}</code>, backend "
        f"<code>{_e(summary['backend'])}</code> on {_e(summary['device'])}</h1>",
        *_cards(summary),
        *_environment(summary),
        *_charts(summary, results),
        *_fast_p(summary),
        *_operators(summary),
        *_matrix(results),
        *_not_tested(summary),
        *_judge_errors(results),
        *_tests(results),
        *_sources(summary, results),
        f"<script>{_JS}</script></body></html>",
    ]
    return "\n".join(parts)


def _cards(summary: dict[str, Any]) -> list[str]:
    tests = summary.get("tests") or {}
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
        ("tests", f"{tests.get('passed', 0)}/{tests.get('total', 0)}", "passed"),
    ]
    return [
        "<div class='cards'>",
        *(
            f"<div class='card'>{_e(k)}<b>{_e(v)}</b><small>{_e(t)}</small></div>"
            for k, v, t in cards
        ),
        "</div>",
    ]


def _gpu_state(state: Any) -> str:
    """``{"start": [per GPU {clocks.sm: .., ...}], "end": [...]}`` as one line per
    moment: what a reader checks (clocks held, temperature, power) without JSON."""
    parts = []
    for when in ("start", "end"):
        gpus = state.get(when) if isinstance(state, dict) else None
        if not isinstance(gpus, list):
            continue
        for i, g in enumerate(gpus):
            if not isinstance(g, dict):
                continue
            label = when if len(gpus) == 1 else f"{when}, GPU {i}"
            fields = ", ".join(f"{k.removeprefix('clocks.')} {v}" for k, v in g.items())
            parts.append(f"{label}: {fields}")
    return "; ".join(parts) if parts else json.dumps(state)


def _env_value(key: str, value: Any) -> Any:
    if key == "gpu_state":
        return _gpu_state(value)
    return value if isinstance(value, (str, int, float, type(None))) else json.dumps(value)


def _environment(summary: dict[str, Any]) -> list[str]:
    env = {k: v for k, v in (summary.get("env") or {}).items() if k != "backend_settings"}
    rows = [
        ("timer", summary.get("timer") or "none (--no-perf)"),
        ("sandbox", summary.get("sandbox")),
        *((k, _env_value(k, v)) for k, v in env.items()),
    ]
    out = ["<h2>Machine and versions</h2><table>"]
    out += [f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows]
    out.append("</table>")
    settings = settings_rows(summary)
    if settings:
        out.append(
            "<h2>Backend settings</h2><p><small>Read back in the workers where the "
            "reference and the candidate ran, at the start and the end of the run; "
            "<b>pinned</b> ones opbench sets for both sides (float32 in IEEE unless "
            "<code>--allow-tf32</code>), the rest are PyTorch's defaults.</small></p>"
            "<table id='settings'><thead><tr><th>setting</th><th>start</th><th>end</th>"
            "<th></th></tr></thead><tbody>"
        )
        out += [
            f"<tr><td><code>{_e(k)}</code></td><td>{_e(v0)}</td>"
            f"<td class='{'' if v1 == v0 else 'bad'}'>{_e(v1)}</td>"
            f"<td>{'pinned' if pinned else ''}</td></tr>"
            for k, v0, v1, pinned in settings
        ]
        out.append("</tbody></table>")
    return out


def _charts(summary: dict[str, Any], results: list[TestResult]) -> list[str]:
    timed = [r for r in results if r.status == "passed" and r.speedup]
    ops = summary.get("ops") or {}
    by_op: dict[str, list[float]] = {}
    for r in timed:
        # operators are keyed aten.<overload>; program problems by their id
        key = f"aten.{r.op}" if f"aten.{r.op}" in ops else r.op
        by_op.setdefault(key, []).append(r.speedup)  # type: ignore[arg-type]
    per_op = [
        (op, v["speedup"], min(by_op.get(op, [v["speedup"]])), max(by_op.get(op, [v["speedup"]])))
        for op, v in ops.items()
        if v.get("speedup")
    ]
    points = [(sol_fraction(r), r.speedup, f"{r.op} {r.args[:80]}") for r in timed]
    return [
        "<h2>Charts</h2><div class='charts'>",
        charts.speedup_histogram([r.speedup for r in timed]),  # type: ignore[misc]
        charts.per_op_speedups(per_op),
        charts.speedup_vs_roofline(points),  # type: ignore[arg-type]
        "</div>",
    ]


def _fast_p(summary: dict[str, Any]) -> list[str]:
    fast = summary.get("fast_p") or {}
    if not fast:
        return []
    return [
        "<h2>fast_p</h2><p><small>Share of the operators that are correct and faster "
        "than p times eager.</small></p><table><tr>",
        *(f"<th>p={_e(p)}</th>" for p in fast),
        "</tr><tr>",
        *(f"<td class='num'>{_num(v, '.2f')}</td>" for v in fast.values()),
        "</tr></table>",
    ]


def _operators(summary: dict[str, Any]) -> list[str]:
    out = [
        "<h2>Operators</h2><table id='ops' class='sortable'><thead><tr><th>op</th>"
        "<th>tests</th><th>passed</th><th>weak</th><th>correct</th><th>speedup (device)</th>"
        "<th>speedup (host)</th><th>failures</th></tr></thead><tbody>"
    ]
    for op, v in (summary.get("ops") or {}).items():
        ok = v.get("correct")
        out.append(
            f"<tr><td><code>{_e(op)}</code></td><td class='num'>{v.get('tests', 0)}</td>"
            f"<td class='num'>{v.get('passed', 0)}</td><td class='num'>{v.get('weak', 0)}</td>"
            f"<td class='{'ok' if ok else 'bad'}'>{'yes' if ok else 'no'}</td>"
            f"<td class='num'>{_num(v.get('speedup'))}</td>"
            f"<td class='num'>{_num(v.get('speedup_host'))}</td>"
            f"<td>{_e(', '.join(f'{k}={n}' for k, n in (v.get('failures') or {}).items()))}</td></tr>"
        )
    out.append("</tbody></table>")
    return out


def _matrix(results: list[TestResult]) -> list[str]:
    """Passed over judged tests per operator and dtype."""
    cells: dict[tuple[str, str], list[int]] = {}
    for r in results:
        if r.status in ("skipped", "not_run", JUDGE_ERROR):
            continue
        c = cells.setdefault((r.op, dtype_of(r.args)), [0, 0])
        c[0] += r.status == "passed"
        c[1] += 1
    if not cells:
        return []
    ops = sorted({op for op, _ in cells})
    dtypes = sorted({d for _, d in cells})
    out = [
        "<h2>Correctness by dtype</h2><table id='matrix'><thead><tr><th>op</th>",
        *(f"<th>{_e(d)}</th>" for d in dtypes),
        "</tr></thead><tbody>",
    ]
    for op in ops:
        row = [f"<tr><td><code>{_e(op)}</code></td>"]
        for d in dtypes:
            c = cells.get((op, d))
            if c is None:
                row.append("<td class='m'></td>")
                continue
            cls = "all" if c[0] == c[1] else "none" if c[0] == 0 else "some"
            row.append(f"<td class='m {cls}'>{c[0]}/{c[1]}</td>")
        out.append("".join(row) + "</tr>")
    out.append("</tbody></table>")
    return out


def _not_tested(summary: dict[str, Any]) -> list[str]:
    if not summary.get("not_tested"):
        return []
    return [
        "<h2>Not tested</h2><table><tr><th>op</th><th>why</th></tr>",
        *(
            f"<tr><td><code>{_e(op)}</code></td><td>{_e(w)}</td></tr>"
            for op, w in summary["not_tested"].items()
        ),
        "</table>",
    ]


def _judge_errors(results: list[TestResult]) -> list[str]:
    """The tests the harness could not plan or judge: opbench's faults, left out of
    every score, listed so the run is not read as complete."""
    failed = [r for r in results if r.status == JUDGE_ERROR]
    if not failed:
        return []
    return [
        f"<h2 class='bad'>Judge errors ({len(failed)})</h2><p><small>The harness could "
        "not plan or judge these tests (an opbench fault, not the backend's): they are "
        "left out of every score, and the run is incomplete.</small></p>"
        "<table><tr><th>test</th><th>op</th><th>stage</th><th>error</th></tr>",
        *(
            f"<tr><td><code>{_e(r.test_id)}</code></td><td><code>{_e(r.op)}</code></td>"
            f"<td>{_e((r.details or {}).get('stage', ''))}</td>"
            f"<td><pre>{_e((r.message or '')[:1500])}</pre></td></tr>"
            for r in failed[:MAX_TEST_ROWS]
        ),
        "</table>",
    ]


def _tests(results: list[TestResult]) -> list[str]:
    """Every test (failing ones first), sortable and filterable in the page."""
    ordered = sorted(results, key=lambda r: (r.status == "passed", r.op, r.test_id))
    shown = ordered[:MAX_TEST_ROWS]
    statuses = sorted({r.status for r in results})
    out = [
        f"<h2>Tests ({len(results)})</h2><div class='filters'><label>filter "
        "<input id='filter' type='search' placeholder='op, dtype, category, text...'></label>"
        "<label>status <select id='status'><option value=''>any</option>",
        *(f"<option>{_e(s)}</option>" for s in statuses),
        f"</select></label><small><span id='shown'>{len(shown)}</span> shown"
        + (f" (the first {MAX_TEST_ROWS})" if len(results) > MAX_TEST_ROWS else "")
        + "; reproduce one with <code>opbench repro RUN_DIR TEST_ID</code></small></div>",
        "<table id='tests' class='sortable'><thead><tr><th>test</th><th>op</th><th>dtype</th>"
        "<th>status</th><th>category</th><th>inputs</th><th>speedup</th><th>SOL</th>"
        "<th>message</th></tr></thead><tbody>",
    ]
    for r in shown:
        sol = sol_fraction(r)
        cls = (
            "ok"
            if r.status == "passed"
            else "warn"
            if r.status in ("skipped", JUDGE_ERROR)
            else "bad"
        )
        out.append(
            f"<tr data-status='{_e(r.status)}'><td><code>{_e(r.test_id)}</code></td>"
            f"<td><code>{_e(r.op)}</code></td><td>{_e(dtype_of(r.args))}</td>"
            f"<td class='{cls}'>{_e(r.status)}</td><td>{_e(r.category or '')}</td>"
            f"<td><code>{_e(r.args[:300])}</code></td>"
            f"<td class='num' data-v='{r.speedup if r.speedup else ''}'>{_num(r.speedup)}</td>"
            f"<td class='num' data-v='{sol if sol is not None else ''}'>"
            f"{'–' if sol is None else f'{sol:.0%}'}</td>"
            f"<td><pre>{_e((r.message or '')[:1500])}</pre></td></tr>"
        )
    out.append("</tbody></table>")
    return out


def _sources(summary: dict[str, Any], results: list[TestResult]) -> list[str]:
    """Each scanned kernel file's source, the verdicts of the ops its folder serves and
    the static scan's findings (a directory backend only; read as text, never run)."""
    scan = summary.get("static_scan") or {}
    root = scan.get("root")
    files = scan.get("files") or {}
    if not root or not files:
        return []
    from opbench.spec.ops import parse_folder_name

    ops = summary.get("ops") or {}
    out = [
        "<h2>Kernel sources</h2><p><small>Each implementation file as it was judged, with "
        "the verdicts of the operators its folder serves and the static scan's findings."
        "</small></p>"
    ]
    for rel, findings in files.items():
        folder = Path(rel).parts[0]
        try:
            target = parse_folder_name(folder)
        except Exception:
            target = folder
        served = [
            (op, v)
            for op, v in ops.items()
            if op.removeprefix("aten.") == target
            or op.removeprefix("aten.").split(".")[0] == target
        ]
        try:
            text = (Path(root) / rel).read_text(errors="replace")
        except OSError as e:
            text = f"(could not read: {e})"
        verdicts = ", ".join(
            f"{op.removeprefix('aten.')}: {'correct' if v.get('correct') else 'not correct'}"
            + (f" {v['speedup']:.3f}x" if v.get("speedup") else "")
            for op, v in served
        )
        marks = "".join(
            f"<li class='{'bad' if f.get('severity') == 'tampering' else 'warn'}'>"
            f"line {_e(f.get('line'))}: <code>{_e(f.get('rule'))}</code> ({_e(f.get('severity'))}) "
            f"{_e(f.get('message') or f.get('detail') or '')}</li>"
            for f in findings
        )
        out.append(
            f"<details id='src-{_e(folder)}'><summary><code>{_e(rel)}</code> · "
            f"{_e(verdicts or 'no operator judged')} · {len(findings)} scan findings</summary>"
            + (f"<ul>{marks}</ul>" if marks else "")
            + f"<pre class='src'>{_e(text[:20000])}</pre></details>"
        )
    return out
