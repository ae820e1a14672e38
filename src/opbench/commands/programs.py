"""CLI commands for program problems: ``opbench lint-problems`` (registered by opbench.cli).

``opbench lint-problems PATH`` runs the problem lints of :mod:`opbench.programs.lint` on
a KernelBench-format problem file or folder: findings on stdout (``--json`` for a
machine-readable list), progress on stderr. Exit 0 without findings, 1 with findings,
2 on bad usage.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer

from opbench.commands.common import device_option, fail, out_console

SIZES = ("small", "full")


def _lint_with_progress(path: Path, size: str, device: str, journal: Path | None) -> Any:
    """Lint with a progress bar on stderr (it disappears when done)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from opbench.programs.lint import default_max_bytes, lint_problems

    max_bytes = default_max_bytes(device)
    columns = (
        TextColumn("[bold]linting"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[file]}"),
    )
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("lint", total=None, file="")

        def on_file(f: Path, index: int, total: int) -> None:
            bar.update(task, total=total, completed=index, file=f.name)

        result = lint_problems(
            path, size, device, max_bytes=max_bytes, on_file=on_file, journal=journal
        )
        bar.update(task, completed=len(result.files))
    return result


def _print_text(result: Any, size: str, device: str) -> None:
    from rich.markup import escape

    for f in result.findings:
        out_console.print(
            f"{escape(f.path)}: [bold red]{f.check}[/] {escape(f.message)}",
            highlight=False,
            soft_wrap=True,
        )
    for path, reason in result.skipped.items():
        out_console.print(f"{escape(path)}: [yellow]skipped[/] {escape(reason)}", soft_wrap=True)
    counts = result.by_check()
    tail = " (" + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) + ")" if counts else ""
    out_console.print(
        f"{len(result.files)} problem file(s) linted at size {size} on {device}: "
        f"{len(result.findings)} finding(s){tail}"
        + (f", {len(result.skipped)} skipped" if result.skipped else ""),
        highlight=False,
    )


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""

    @app.command("lint-problems")
    def lint_problems_cmd(
        path: Path = typer.Argument(
            ..., help="A problem file, or a folder of them (level subfolders included)."
        ),
        size: str = typer.Option(
            None,
            help="small | full: passed to get_inputs/get_init_inputs that take a size "
            "(KernelBench files have one size). Default: full on cuda, small on cpu.",
        ),
        device: str = typer.Option("cpu", help="cpu | cuda | cuda:N"),
        # Like commands.run.run_cmd's options, kept apart: each command owns its flags and help
        json_out: bool = typer.Option(
            False, "--json", help="Print the findings as JSON on stdout."
        ),
        journal: Path = typer.Option(
            None,
            help="Append each file's result to this JSON-lines file as it finishes; files "
            "already in it are not linted again (an interrupted lint resumes).",
        ),
    ) -> None:
        """Check program problems for weaknesses a wrong kernel could pass; exit 1 on findings.

        Each problem runs with fixed weights and inputs from three seeds. Findings: an
        output nearly constant across inputs (a fixed answer passes atol=rtol=1e-2), an
        input that does not reach the output, an output so small that zeros pass, a
        forward that draws random numbers, NaN/Inf outputs, and files that fail to
        import, lack Model/get_inputs/get_init_inputs, or raise.

        Example: opbench lint-problems ../shared/kernelbench/level1 --json
        """
        chosen = size or ("full" if device.startswith("cuda") else "small")
        if chosen not in SIZES:
            fail(f"--size {size!r}: choose small or full")
        dev = device_option(device)
        if not path.expanduser().exists():
            fail(f"no such problem file or folder: {path}")
        try:
            result = _lint_with_progress(path, chosen, dev, journal)
        except ValueError as e:
            fail(str(e))
            raise
        if not result.files:
            fail(f"no problem files (*.py) under {path}")
        if json_out:
            payload = {"size": chosen, "device": dev, **result.to_json()}
            sys.stdout.write(json.dumps(payload, indent=2) + "\n")
        else:
            _print_text(result, chosen, dev)
        if result.findings:
            raise typer.Exit(1)
