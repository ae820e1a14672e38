"""Terminal tables for a run summary and for comparing two runs (rich)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table


def _fmt(x: Any, spec: str = ".3f") -> str:
    return "-" if x is None else format(x, spec)


def summary_table(summary: dict[str, Any], *, failures_only: bool = False) -> Table:
    table = Table(title=f"{summary['suite']} · backend {summary['backend']} · {summary['device']}")
    for col in ("op", "tests", "passed", "weak", "correct", "speedup", "host", "failures"):
        table.add_column(
            col,
            justify="right" if col in ("tests", "passed", "weak", "speedup", "host") else "left",
        )
    for op, v in summary["ops"].items():
        if failures_only and v.get("correct"):
            continue
        table.add_row(
            op,
            str(v.get("tests", 0)),
            str(v.get("passed", 0)),
            str(v.get("weak", 0) or ""),
            "[green]yes[/]" if v.get("correct") else "[red]no[/]",
            _fmt(v.get("speedup")),
            _fmt(v.get("speedup_host")),
            ", ".join(f"{k}={n}" for k, n in (v.get("failures") or {}).items()),
        )
    return table


def score_line(summary: dict[str, Any]) -> str:
    cs = summary.get("correctness_score")
    t = summary["tests"]
    fast = summary.get("fast_p") or {}
    timer = summary.get("timer")
    perf = (
        f"performance_score {_fmt(summary.get('performance_score'))} (device) · "
        f"{_fmt(summary.get('performance_score_host'))} (host) over {summary.get('performance_ops', 0)} ops"
        f" · fast_1.0 {_fmt(fast.get('1.0'), '.2f')} (timer: {timer})"
        if timer
        else "no timing (--no-perf)"
    )
    return (
        f"correctness_score [bold]{_fmt(cs)}[/] ({summary.get('ops_correct')}/"
        f"{summary.get('ops_in_denominator')} ops) · {perf} · tests {t['passed']}/{t['total']} passed"
        f" · {summary.get('timing_s', {}).get('run', 0):.1f} s · {summary['run_dir']}"
    )


def print_summary(
    summary: dict[str, Any], console: Console, *, failures_only: bool = False
) -> None:
    console.print(summary_table(summary, failures_only=failures_only))
    for op, why in summary.get("not_tested", {}).items():
        console.print(f"[yellow]not tested[/] {op}: {why}")
    if summary.get("backend_load_errors"):
        for op, why in summary["backend_load_errors"].items():
            console.print(f"[red]kernel not loaded[/] {op}: {why}")
    console.print(score_line(summary))


def compare_runs(
    a: dict[str, Any], b: dict[str, Any], *, threshold: float = 0.05
) -> tuple[Table, list[str]]:
    """Per-op comparison of two summaries; returns the table and the regressions found.

    A regression is an op correct in A but not in B, or whose speedup dropped by more
    than ``threshold`` (relative).
    """
    table = Table(title=f"{a['run_dir']}  →  {b['run_dir']}")
    for col in ("op", "correct A", "correct B", "speedup A", "speedup B", "change"):
        table.add_column(col)
    regressions: list[str] = []
    for op in sorted(set(a["ops"]) | set(b["ops"])):
        va, vb = a["ops"].get(op, {}), b["ops"].get(op, {})
        sa, sb = va.get("speedup"), vb.get("speedup")
        change = ""
        if sa and sb:
            rel = sb / sa - 1
            change = f"{rel:+.1%}"
            if rel < -threshold:
                regressions.append(f"{op}: speedup {sa:.3f} -> {sb:.3f}")
        if va.get("correct") and not vb.get("correct"):
            regressions.append(f"{op}: correct -> not correct")
        table.add_row(
            op, str(va.get("correct", "-")), str(vb.get("correct", "-")), _fmt(sa), _fmt(sb), change
        )
    return table, regressions
