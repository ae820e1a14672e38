"""CLI commands: selftest (registered on the typer app by opbench.cli).

``opbench selftest`` checks the timing protocol against answers known in advance (aten
against itself, double work, a host delay, a side-stream trick). The logic lives in
:mod:`opbench.judge.selftest`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import typer


def _fmt(x: Any, digits: int = 3) -> str:
    if isinstance(x, float):
        return "-" if math.isnan(x) else f"{x:.{digits}f}"
    return "-" if x is None else str(x)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""

    @app.command("selftest")
    def selftest_cmd(
        device: str = typer.Option("cpu", help="cuda | cuda:N | cpu"),
        out: Path = typer.Option(None, "--out", "-o", help="Write the full result as JSON here."),
        quick: bool = typer.Option(False, "--quick", help="Fewer cases, shorter budgets."),
    ) -> None:
        """Check the timing protocol against known answers; exit 1 if a check fails.

        aten against aten must come out 1.00; a candidate doing the work twice ~0.5x on
        device time; a 20 us host busy-wait shows in host-inclusive time only; a
        side-stream candidate is flagged and not faster (CUDA only). On CPU the same
        protocol runs with the wall-clock timer and looser expectations.

        Example: opbench selftest --device cuda --out selftest.json
        """
        from rich.table import Table

        from opbench.cli import _state, fail, out_console

        try:
            import torch

            dev = torch.device(device)
        except RuntimeError:
            fail(f"unknown device {device!r}")
            return
        if dev.type not in ("cpu", "cuda"):
            fail(f"--device must be cpu or cuda, not {device!r}")
        if dev.type == "cuda" and not torch.cuda.is_available():
            fail("--device cuda asked, but torch sees no CUDA device")
        from opbench.judge.selftest import run_selftest

        try:
            result = run_selftest(str(dev), quick=quick)
        except Exception as e:  # noqa: BLE001 - one line unless --debug
            if _state.get("debug"):
                raise
            fail(f"selftest failed to run: {type(e).__name__}: {e}")
            return
        table = Table(title=f"opbench selftest on {result['device_name']} ({result['timer']})")
        table.add_column("experiment")
        table.add_column("result")
        table.add_column("expected")
        table.add_column("ok")
        same = result["aten_vs_aten"]
        rows = {
            "aten_vs_aten": f"geomean {_fmt(same['geomean'], 4)}, within 2% {_fmt(same['within_2pct'], 2)}, "
            f"within 5% {_fmt(same['within_5pct'], 2)} ({same['cases']} cases)",
            "double_work": f"device geomean {_fmt(result['double_work']['geomean'])}",
            "host_delay": f"host +{_fmt(result['host_delay']['added_us'], 1)} us, device geomean "
            f"{_fmt(result['host_delay']['device_geomean'])}",
            "side_stream": f"device geomean {_fmt(result['side_stream'].get('geomean'))}, flagged "
            f"{result['side_stream'].get('flagged', '-')}/{result['side_stream'].get('cases', '-')}",
        }
        for name, text in rows.items():
            check = result["checks"].get(name)
            table.add_row(
                name,
                text,
                check["expect"] if check else "n/a",
                ("[green]yes[/]" if check["passed"] else "[red]NO[/]") if check else "-",
            )
        out_console.print(table)
        out_console.print(
            f"launch floor {result['launch_floor_ms'] * 1e3:.2f} us · {result['duration_s']:.1f} s"
        )
        if out is not None:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(result, indent=1, default=str))
            out_console.print(f"wrote {out}")
        if not result["passed"]:
            raise typer.Exit(1)
