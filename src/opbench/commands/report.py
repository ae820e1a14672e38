"""CLI commands: ``opbench report`` and ``opbench compare`` (read a run directory)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.console import Console


def load_summary(run_dir: Path) -> dict[str, Any]:
    path = Path(run_dir) / "summary.json"
    if not path.exists():
        from opbench.cli import fail

        fail(f"{path} does not exist: is {run_dir} a finished opbench run directory?")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        from opbench.cli import fail

        fail(f"{path} is not valid JSON ({e}); re-run with --resume to rewrite it")
        raise


def register(app: typer.Typer) -> None:
    @app.command("report")
    def report_cmd(
        run_dir: Path = typer.Argument(..., help="A run directory (holds summary.json)."),
        html: bool = typer.Option(False, "--html", help="Also (re)write RUN_DIR/report.html."),
        failures: bool = typer.Option(
            False, "--failures", help="Show only ops that are not correct."
        ),
    ) -> None:
        """Show a finished run's table and scores.

        Example: opbench report runs/smoke --html
        """
        from opbench.report.tables import print_summary

        summary = load_summary(run_dir)
        print_summary(summary, Console(), failures_only=failures)
        if html:
            from opbench.report.html import render
            from opbench.run.store import ResultStore

            store = ResultStore(Path(run_dir) / "results.sqlite")
            (Path(run_dir) / "report.html").write_text(render(summary, store.results()))
            store.close()
            Console(stderr=True).print(f"wrote {Path(run_dir) / 'report.html'}")

    @app.command("compare")
    def compare_cmd(
        run_a: Path = typer.Argument(..., help="Baseline run directory."),
        run_b: Path = typer.Argument(..., help="New run directory."),
        threshold: float = typer.Option(
            0.05, help="Relative speedup drop that counts as a regression."
        ),
        ignore_settings: bool = typer.Option(
            False,
            "--ignore-settings",
            help="Rank the runs even if their devices or backend settings differ.",
        ),
    ) -> None:
        """Compare two runs op by op; exit 1 when B regresses against A, 3 when the runs
        were measured differently (device, GPU or backend settings such as TF32).

        Example: opbench compare runs/before runs/after
        """
        from opbench.report.settings import differences
        from opbench.report.tables import compare_runs

        a, b = load_summary(run_a), load_summary(run_b)
        console = Console()
        differ = differences(a, b)
        if differ and not ignore_settings:
            console.print(
                f"[red]cannot rank these runs[/]: {run_a} and {run_b} were measured "
                "differently (--ignore-settings compares them anyway):"
            )
            for line in differ:
                console.print(f"  {line}")
            raise typer.Exit(3)
        table, regressions = compare_runs(a, b, threshold=threshold)
        for line in differ:
            console.print(f"[yellow]measured differently[/] {line}")
        console.print(table)
        for line in regressions:
            console.print(f"[red]regression[/] {line}")
        if regressions:
            raise typer.Exit(1)
