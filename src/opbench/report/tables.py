"""Terminal tables for a run summary and for comparing two runs (rich)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table


def _fmt(x: Any, spec: str = ".3f") -> str:
    return "-" if x is None else format(x, spec)


def _worst_first(item: tuple[str, dict[str, Any]]) -> tuple[Any, ...]:
    op, v = item
    return (bool(v.get("correct")), v.get("speedup") or 0.0, op)


def summary_table(
    summary: dict[str, Any], *, failures_only: bool = False, width: int = 120
) -> Table:
    """Per operator, worst first (not correct, then slowest): tests, verdict, speedups,
    the timing spread and the roofline fraction. Names are never cut: the ``aten.``
    prefix every operator shares is dropped and long names wrap. In a terminal narrower
    than 110 columns the spread and roofline columns are left out, and ``weak`` when no
    test is weak."""
    ops = summary["ops"]
    wide = width >= 110
    show_weak = any(v.get("weak") for v in ops.values())
    table = Table(
        title=f"{summary['suite']} · backend {summary['backend']} · {summary['device']}",
        pad_edge=False,
    )
    table.add_column("op", overflow="fold", min_width=16)
    table.add_column("tests", justify="right", no_wrap=True)
    table.add_column("ok", justify="right", no_wrap=True)
    if show_weak:
        table.add_column("weak", justify="right", no_wrap=True)
    table.add_column("correct", no_wrap=True)
    table.add_column("speedup", justify="right", no_wrap=True)
    table.add_column("host", justify="right", no_wrap=True)
    if wide:
        table.add_column("spread", justify="right", no_wrap=True)
        table.add_column("SOL", justify="right", no_wrap=True)
    table.add_column("failures", overflow="fold")
    for op, v in sorted(ops.items(), key=_worst_first):
        if failures_only and v.get("correct"):
            continue
        spread, sol = v.get("spread"), v.get("sol_fraction")
        row = [op.removeprefix("aten."), str(v.get("tests", 0)), str(v.get("passed", 0))]
        if show_weak:
            row.append(str(v.get("weak", 0) or ""))
        row += [
            "[green]yes[/]" if v.get("correct") else "[red]no[/]",
            _fmt(v.get("speedup")),
            _fmt(v.get("speedup_host")),
        ]
        if wide:
            row += [
                "-" if spread is None else f"{spread:.0%}",
                "-" if sol is None else f"{sol:.0%}",
            ]
        row.append(", ".join(f"{k}={n}" for k, n in (v.get("failures") or {}).items()))
        table.add_row(*row)
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
    console.print(summary_table(summary, failures_only=failures_only, width=console.width))
    for op, why in summary.get("not_tested", {}).items():
        console.print(f"[yellow]not tested[/] {op}: {why}")
    if summary.get("backend_load_errors"):
        for op, why in summary["backend_load_errors"].items():
            console.print(f"[red]kernel not loaded[/] {op}: {why}")
    if summary.get("judge_errors"):
        by_op = summary.get("judge_errors_by_op") or {}
        ops = ", ".join(f"{op.removeprefix('aten.')} {n}" for op, n in by_op.items())
        console.print(
            f"[red]judge_error[/] {summary['judge_errors']} test(s) the harness could not plan "
            f"or judge (left out of every score; the run is incomplete): {ops}"
        )
    left = summary.get("unfinished")
    if left:
        errors = "; ".join(sorted({e.get("error", "") for e in left.get("errors", [])}))
        console.print(
            f"[red]unfinished[/] {left['tests']} test(s) of {len(left['ops'])} op(s) have no "
            f"result after a harness error ({errors or 'no error noted'}): "
            f"{left['how_to_finish']} to finish them"
        )
    console.print(score_line(summary))


def compare_runs(a: dict[str, Any], b: dict[str, Any]) -> Table:
    """Per-op table of two summaries (the regressions are :mod:`opbench.report.compare`'s)."""
    table = Table(title=f"{a['run_dir']}  →  {b['run_dir']}")
    table.add_column("op", overflow="fold")
    for col in ("correct A", "correct B", "speedup A", "speedup B", "change"):
        table.add_column(col, no_wrap=True)
    for op in sorted(set(a["ops"]) | set(b["ops"])):
        va, vb = a["ops"].get(op, {}), b["ops"].get(op, {})
        sa, sb = va.get("speedup"), vb.get("speedup")
        change = f"{sb / sa - 1:+.1%}" if sa and sb else ""
        table.add_row(
            op.removeprefix("aten."),
            str(va.get("correct", "-")),
            str(vb.get("correct", "-")),
            _fmt(sa),
            _fmt(sb),
            change,
        )
    return table


def test_changes_table(changes: list[Any], limit: int) -> Table:
    """The changed tests, significant ones first, then by size of the change."""
    ordered = sorted(changes, key=lambda c: (not c.significant, -abs(c.rel_change or 1)))
    n_sig = sum(c.significant for c in changes)
    table = Table(title=f"tests that changed: {n_sig} significant of {len(changes)}")
    table.add_column("test", overflow="fold")
    table.add_column("op", overflow="fold")
    for col in ("A", "B", "significant"):
        table.add_column(col, no_wrap=True)
    table.add_column("why", overflow="fold")
    for c in ordered[:limit]:
        table.add_row(
            c.test_id,
            c.op,
            _fmt(c.speedup_a) if c.status_a == "passed" else c.status_a,
            _fmt(c.speedup_b) if c.status_b == "passed" else c.status_b,
            "[red]yes[/]" if c.significant else "no",
            c.why,
        )
    return table
