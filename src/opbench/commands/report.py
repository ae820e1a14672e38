"""CLI commands: ``opbench report`` and ``opbench compare`` (read a run directory)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from opbench.commands.common import fail


def load_summary(run_dir: Path) -> dict[str, Any]:
    path = Path(run_dir) / "summary.json"
    if not path.exists():
        fail(f"{path} does not exist: is {run_dir} a finished opbench run directory?")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
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
            0.05, help="Relative drop of an op's speedup that can count as a regression."
        ),
        ignore_settings: bool = typer.Option(
            False,
            "--ignore-settings",
            help="Rank the runs even if their devices or backend settings differ.",
        ),
        html_out: Path = typer.Option(None, "--html", help="Also write the comparison page."),
        show: int = typer.Option(20, help="Changed tests listed (significant first)."),
    ) -> None:
        """Compare two runs op by op and test by test; exit 1 when B regresses against A,
        3 when the runs were measured differently (device, GPU or backend settings).

        A test's speedup change is significant when it exceeds 2% and the two runs'
        intervals (speedup x (1 +- 2 x its relative standard error, from the recorded
        repetitions)) do not overlap. An op regresses when it stops being correct, or its
        speedup drops by more than --threshold with at least one significantly slower
        test.

        Example: opbench compare runs/before runs/after --html compare.html
        """
        from opbench.report.compare import compare_tests, op_regressions, render_html
        from opbench.report.settings import differences
        from opbench.report.tables import compare_runs, test_changes_table

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
        changes = compare_tests(run_a, run_b)
        regressions = op_regressions(a, b, changes, threshold)
        console.print(compare_runs(a, b))
        if changes:
            console.print(test_changes_table(changes, show))
        for line in differ:
            console.print(f"[yellow]measured differently[/] {line}")
        for line in regressions:
            console.print(f"[red]regression[/] {line}")
        if html_out is not None:
            html_out.write_text(render_html(a, b, changes, regressions))
            Console(stderr=True).print(f"wrote {html_out}")
        if regressions:
            raise typer.Exit(1)
