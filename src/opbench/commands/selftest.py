"""CLI commands: selftest (registered on the typer app by opbench.cli).

``opbench selftest`` checks the timing protocol against answers known in advance (aten
against itself, double work, a host delay, a side-stream trick, a user's Python kernel
through the run path). The logic lives in :mod:`opbench.judge.selftest`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import typer

from opbench.commands.common import device_option, fail, out_console, state


def _fmt(x: Any, digits: int = 3) -> str:
    if isinstance(x, float):
        return "-" if math.isnan(x) else f"{x:.{digits}f}"
    return "-" if x is None else str(x)


def _rows(result: dict[str, Any]) -> dict[str, str]:
    """One line of result per experiment that ran, for the table."""
    rows: dict[str, str] = {}
    same = result.get("aten_vs_aten")
    if same is not None:
        rows["aten_vs_aten"] = (
            f"geomean {_fmt(same['geomean'], 4)}, within 2% {_fmt(same['within_2pct'], 2)}, "
            f"within 5% {_fmt(same['within_5pct'], 2)} ({same['cases']} cases)"
        )
    if "double_work" in result:
        rows["double_work"] = f"device geomean {_fmt(result['double_work']['geomean'])}"
    if "host_delay" in result:
        delay = result["host_delay"]
        rows["host_delay"] = (
            f"host +{_fmt(delay['added_us'], 1)} us, device geomean {_fmt(delay['device_geomean'])}"
        )
    side = result.get("side_stream")
    if side is not None:
        rows["side_stream"] = (
            f"device geomean {_fmt(side.get('geomean'))}, flagged "
            f"{side.get('flagged', '-')}/{side.get('cases', '-')}"
        )
    py = result.get("python_kernel")
    if py is not None:
        rows["python_kernel"] = (
            f"error: {py['error']}"
            if "error" in py
            else f"host geomean {_fmt(py['host_geomean'])} vs expected "
            f"{_fmt(py['expected_host_geomean'])} ({_pct(py['ratio'] - 1)}, {py['cases']} cases)"
        )
    return rows


def _pct(x: float) -> str:
    return f"{x:+.1%}" if math.isfinite(x) else "-"


def _python_kernel_lines(py: dict[str, Any]) -> list[str]:
    """Per case of the python-kernel experiment: the judge's host speedup beside the
    expected one and both sides' host times (the judge's and the plain subprocess's)."""
    return [
        f"  python_kernel {r['case']}: judge {_fmt(r['speedup_host'])} "
        f"(ref {_fmt(r['ref_host_us'], 2)} us, kernel {_fmt(r['cand_host_us'], 2)} us) · "
        f"expected {_fmt(r['expected'])} (aten {_fmt(r['aten_us'], 2)} us, kernel "
        f"{_fmt(r['kernel_us'], 2)} us; runs {', '.join(_fmt(e) for e in r['expected_runs'])})"
        + (f" · {r['status']}: {r['message']}" if r["status"] != "passed" else "")
        for r in py.get("results", [])
    ]


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""

    @app.command("selftest")
    def selftest_cmd(
        device: str = typer.Option("cpu", help="cuda | cuda:N | cpu"),
        out: Path = typer.Option(None, "--out", "-o", help="Write the full result as JSON here."),
        quick: bool = typer.Option(False, "--quick", help="Fewer cases, shorter budgets."),
        only: str = typer.Option(
            None,
            "--only",
            help="Comma-separated experiments to run (aten_vs_aten, double_work, host_delay, "
            "side_stream, python_kernel); default all.",
        ),
    ) -> None:
        """Check the timing protocol against known answers; exit 1 if a check fails.

        aten against aten must come out 1.00; a candidate doing the work twice ~0.5x on
        device time; a 20 us host busy-wait shows in host-inclusive time only; a
        side-stream candidate is flagged and not faster (CUDA only); a kernel directory
        whose kernel is a Python function calling the aten op, judged by the run path,
        must show the host speedup measured apart in a plain subprocess, within 3%. On
        CPU the same protocol runs with the wall-clock timer and looser expectations.

        Example: opbench selftest --device cuda --out selftest.json
        Example: opbench selftest --device cuda --only python_kernel
        """
        from rich.table import Table

        dev = device_option(device)
        from opbench.judge.selftest import EXPERIMENTS, run_selftest

        names = [x.strip() for x in only.split(",") if x.strip()] if only else None
        unknown = sorted(set(names or []) - set(EXPERIMENTS))
        if unknown:
            fail(f"--only: unknown experiment(s) {', '.join(unknown)}; choose from "
                 + ", ".join(EXPERIMENTS))  # fmt: skip
        try:
            result = run_selftest(dev, quick=quick, only=names)
        except Exception as e:  # noqa: BLE001 - one line unless --debug
            if state.get("debug"):
                raise
            fail(f"selftest failed to run: {type(e).__name__}: {e}")
            return
        table = Table(title=f"opbench selftest on {result['device_name']} ({result['timer']})")
        table.add_column("experiment")
        table.add_column("result")
        table.add_column("expected")
        table.add_column("ok")
        rows = _rows(result)
        for name, text in rows.items():
            check = result["checks"].get(name)
            table.add_row(
                name,
                text,
                check["expect"] if check else "n/a",
                ("[green]yes[/]" if check["passed"] else "[red]NO[/]") if check else "-",
            )
        out_console.print(table)
        for line in _python_kernel_lines(result.get("python_kernel") or {}):
            out_console.print(line, highlight=False)
        out_console.print(
            f"launch floor {result['launch_floor_ms'] * 1e3:.2f} us · {result['duration_s']:.1f} s"
        )
        if out is not None:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(result, indent=1, default=str))
            out_console.print(f"wrote {out}")
        if not result["passed"]:
            raise typer.Exit(1)
