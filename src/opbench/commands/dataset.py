"""CLI commands: dataset (registered on the typer app by opbench.cli).

``opbench dataset TRACES -o FILE.parquet|FILE.json`` writes the traces suite as a table,
one row per distinct (operator, arguments) pair, with the fields of BackendBench's
published TorchBench data set. The logic lives in :mod:`opbench.suites.traces`.
"""

from __future__ import annotations

from pathlib import Path

import typer

from opbench.commands.common import fail, out_console, state


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""

    @app.command("dataset")
    def dataset_cmd(
        traces: str = typer.Argument(
            None,
            help="Trace folder, .txt trace or parquet (default: OPBENCH_TRACES, else the download).",
        ),
        out: Path = typer.Option(..., "--out", "-o", help="Output file: .parquet or .json."),
        device: str = typer.Option(
            "cpu", help="Target device: decides which device-specific cases are runnable."
        ),
        ops: str = typer.Option(None, help="Comma list of overloads (add.Tensor) or ops (add)."),
        cache: bool = typer.Option(True, "--cache/--no-cache", help="Reuse dry-run verdicts."),
        measure: bool = typer.Option(
            None,
            "--measure/--no-measure",
            help="Fill runtime_ms and the overhead fields by timing PyTorch (default: on cuda).",
        ),
        measure_limit_per_op: int = typer.Option(
            None, help="Time at most N included rows per op (the rest stay null)."
        ),
    ) -> None:
        """Write the traces suite as a table (uuid, op_name, args, runnable, included_in_benchmark, ...).

        One row per distinct (op, args) pair; every excluded row says why.

        Example: opbench dataset ../shared/traces -o problems.parquet --device cpu

        With --device cuda (or --measure) the runtime fields are filled by timing PyTorch
        on every included row (--measure-limit-per-op N for a quicker table).
        """
        from opbench.spec.ops import UnknownOpError, select_ops
        from opbench.suites.sources import DownloadError, resolve_traces
        from opbench.suites.traces import (
            TraceFormatError,
            build_trace_cases,
            dataset_rows,
            dataset_summary,
            load_traces,
            write_dataset,
        )

        if out.suffix.lower() not in (".parquet", ".json"):
            fail(f"--out must end in .parquet or .json, not {out.name!r}")
        try:
            import torch

            dev = torch.device(device).type
        except RuntimeError:
            fail(f"unknown device {device!r}")
            return
        try:
            source = resolve_traces(traces)
            wanted = None
            if ops:
                available = {e.op for e in load_traces(source)}
                from opbench.suites.inputs import resolve_op_name

                available = {resolve_op_name(o) for o in available}
                wanted, _ = select_ops([o for o in ops.split(",") if o.strip()], available)
            cases = build_trace_cases(source, ops=wanted, device=dev, use_cache=cache)
            rows = dataset_rows(cases)
            if measure if measure is not None else dev == "cuda":
                from rich.progress import Progress

                from opbench.judge.runtimes import fill_runtimes

                with Progress(console=out_console, transient=True) as bar:
                    task = bar.add_task("timing PyTorch on each included row", total=None)
                    timed = fill_runtimes(
                        rows,
                        cases,
                        device,
                        limit_per_op=measure_limit_per_op,
                        on_progress=lambda i, n: bar.update(task, completed=i, total=n),
                    )
                out_console.print(
                    f"timed {timed['timed']} rows ({timed['failed']} failed), launch floor "
                    f"{timed['launch_floor_us']} us",
                    highlight=False,
                )
            path = write_dataset(rows, out)
        except (
            FileNotFoundError,
            TraceFormatError,
            DownloadError,
            UnknownOpError,
            ImportError,
            ValueError,
        ) as e:
            if state.get("debug"):
                raise
            fail(str(e).splitlines()[0])
            return
        _print_summary(out_console, dataset_summary(cases), path, dev)


def _print_summary(console, summary: dict, path: Path, device: str) -> None:
    from rich.table import Table

    console.print(f"wrote {summary['rows']} rows to {path} (device {device})", highlight=False)
    table = Table(show_header=True)
    table.add_column("what")
    table.add_column("count", justify="right")
    table.add_row("operators (overloads)", str(summary["ops"]))
    table.add_row("operators with an included row", str(summary["ops_included"]))
    table.add_row("rows (distinct op, args)", str(summary["rows"]))
    table.add_row("runnable", str(summary["runnable"]))
    table.add_row("included", str(summary["included"]))
    console.print(table)
    if summary["reasons"]:
        reasons = Table(title="top exclusion reasons", show_header=True)
        reasons.add_column("rows", justify="right")
        reasons.add_column("reason")
        for reason, n in summary["reasons"][:10]:
            reasons.add_row(str(n), reason)
        console.print(reasons)
