"""CLI commands for backends: ``init``, ``package``, ``trace``, ``check-model``.

Thin: parse flags, call :mod:`opbench.backends.scaffold`, :mod:`opbench.backends.packaging`,
:mod:`opbench.tracing` and :mod:`opbench.models.check`.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from opbench.commands.common import fail

if TYPE_CHECKING:
    from opbench.models.check import ModelCheck


def _graph_cells(r: ModelCheck) -> tuple[str, str, str]:
    """The graph columns of a check-model row: ms per replay, or "failed" (the reason
    is printed under the table, whole: a table cell would cut it)."""

    def ms(v: float | None, err: str | None) -> str:
        return "failed" if err else ("-" if v is None else f"{v:.2f}")

    speedup = r.graph_speedup
    return (
        ms(r.eager_graph_ms, r.eager_graph_error),
        ms(r.backend_graph_ms, r.backend_graph_error),
        "-" if speedup is None else f"{speedup:.2f}x",
    )


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""

    @app.command("init")
    def init_cmd(
        directory: Path = typer.Argument(..., help="Kernel directory to create or extend."),
        # Like commands.run.run_cmd's options, kept apart: each command owns its flags and help
        ops: str = typer.Option(
            None, help="Comma list: overloads (add.Tensor) or bare ops (relu)."
        ),
        top: int = typer.Option(None, help="Also the N most used overloads in the traces."),
        traces: Path = typer.Option(
            None, help="Trace folder or file (default OPBENCH_TRACES or ../shared/traces)."
        ),
        force: bool = typer.Option(False, help="Overwrite existing implementation files."),
    ) -> None:
        """Scaffold kernel folders with templates (schema, arguments, trace shapes, reference).

        Example: opbench init my_kernels --ops add.Tensor,relu --top 10
        """
        from opbench.backends.scaffold import init_directory
        from opbench.spec.ops import UnknownOpError

        names = [o for o in (ops or "").split(",") if o.strip()]
        if not names and not top:
            fail("give --ops LIST and/or --top N")
        try:
            result = init_directory(directory, names, top=top, traces=traces, force=force)
        except (UnknownOpError, FileNotFoundError, ValueError) as e:
            fail(str(e).splitlines()[0])
            return
        console = Console()
        for p in result.created:
            console.print(f"created {p}")
        for p in result.kept:
            console.print(f"kept    {p} (exists; --force to overwrite)")

    @app.command("package")
    def package_cmd(
        directory: Path = typer.Argument(..., help="Kernel directory to package."),
        name: str = typer.Option(..., help="Python package name (an identifier)."),
        out: Path = typer.Option(..., "-o", "--out", help="Folder to write the package into."),
        version: str = typer.Option("0.1.0", help="Package version."),
        force: bool = typer.Option(False, help="Replace OUT if it exists."),
        # Same shape as check_model_cmd's --allow-tf32 option, another flag: nothing to share
        from_run: Path = typer.Option(
            None,
            "--from-run",
            help="A judged run of these kernels: serve only the ops and shape classes where "
            "it found them faster than eager (serve_policy.json in the package).",
        ),
        measure: str = typer.Option(
            "host", help="With --from-run: host (host-inclusive, what a model pays) | device."
        ),
        min_speedup: float = typer.Option(
            1.0, help="With --from-run: serve a class when its geomean speedup beats this."
        ),
    ) -> None:
        """Make a pip-installable package whose NAME.enable() registers the kernels.

        Example: opbench package my_kernels --name my_kernels -o dist/my_kernels && pip install dist/my_kernels
        Serve only where a judged run won: opbench package my_kernels --name my_kernels -o dist/my_kernels --from-run runs/judged
        """
        from opbench.backends.packaging import PackageError, build_package

        try:
            path = build_package(
                directory,
                name,
                out,
                version=version,
                force=force,
                from_run=from_run,
                measure=measure,
                min_speedup=min_speedup,
            )
        except PackageError as e:
            fail(str(e))
            return
        Console().print(
            f"wrote {path}; install with: pip install {path}\n"
            f"use: import {name}; {name}.enable()  |  judge: opbench run --backend module:{name}"
        )

    @app.command(
        "trace", context_settings={"allow_extra_args": True, "ignore_unknown_options": True}
    )
    def trace_cmd(
        ctx: typer.Context,
        script: Path = typer.Argument(..., help="Python script to run (as __main__)."),
        out: Path = typer.Option(
            None, "-o", "--out", help="Trace file (default SCRIPT_trace.txt)."
        ),
    ) -> None:
        """Record the ATen calls a script makes as a trace file (arguments after SCRIPT go to it).

        Example: opbench trace train.py -o my_model.txt && opbench run --suite traces:my_model.txt --backend aten
        """
        from opbench.tracing import trace_script, write_trace

        dest = out or script.with_name(f"{script.stem}_trace.txt")
        try:
            recorder = trace_script(script, list(ctx.args))
        except FileNotFoundError as e:
            fail(str(e))
            return
        except SystemExit as e:
            if e.code not in (0, None):
                fail(f"{script} exited with status {e.code}")
            return
        path = write_trace(recorder, dest)
        n_ops = len(recorder.counts)
        n_lines = sum(len(c) for c in recorder.counts.values())
        Console(stderr=True).print(f"wrote {path}: {n_ops} operators, {n_lines} argument lines")

    @app.command("check-model")
    def check_model_cmd(
        backend: str = typer.Option("aten", help="aten | PATH | module:NAME[:FUNC]"),
        device: str = typer.Option("cpu", help="cpu | cuda"),
        models: str = typer.Option(
            "bert,gpt2,resnet,encoder", help="Comma list of bert, gpt2, resnet, encoder."
        ),
        compile: bool = typer.Option(False, "--compile", help="Also run under torch.compile."),
        compile_backend: str = typer.Option("inductor", help="torch.compile backend."),
        scale: int = typer.Option(1, help="Width multiplier for the models."),
        rtol: float = typer.Option(1e-4, help="Allowed error relative to each tensor's scale."),
        kernel_version: str = typer.Option(None, help="Implementation version in a directory."),
        json_out: Path = typer.Option(None, "--json", help="Also write the results as JSON."),
        show_ops: bool = typer.Option(True, "--ops/--no-ops", help="Print the coverage table."),
        time_steps: int = typer.Option(
            0, help="Also time this many training steps eager and on the backend (median)."
        ),
        # Same shape as package_cmd's --from-run option, another flag: nothing to share
        allow_tf32: bool = typer.Option(
            False,
            "--allow-tf32",
            help="Let float32 matmuls and convolutions use TF32 (eager "
            "and backend alike); IEEE float32 otherwise, as opbench run pins.",
        ),
        only: str = typer.Option(
            None,
            help="Register only these overloads of the backend (comma list), to find "
            "which kernel breaks a model.",
        ),
        policy: Path = typer.Option(
            None,
            "--policy",
            help="Serve only where a judged run found the kernels faster than eager: a run "
            "directory or a serve_policy.json (opbench package --from-run).",
        ),
        policy_measure: str = typer.Option(
            "host",
            "--policy-measure",
            help="With --policy RUN_DIR: decide on host-inclusive speedups (host: what an "
            "eager-mode step pays) or device time (device: what a step captured as a CUDA "
            "graph pays). The C++ gate's own launches are decided on device time either way.",
        ),
        native: bool = typer.Option(
            True,
            "--native/--no-native",
            help="Put the C++ gate in front of the registered ops (elementwise launches "
            "from C++ on CUDA, policy decisions without Python); --no-native measures the "
            "Python path alone.",
        ),
        cuda_graphs: bool = typer.Option(
            False,
            "--cuda-graphs",
            help="With --time-steps on CUDA: also capture each whole training step as a "
            "CUDA graph, eager and on the backend, and time its replays (no host cost).",
        ),
        autocast: str = typer.Option(
            None,
            "--autocast",
            help="bf16 | f16: run each step's forward and loss under torch.autocast, as "
            "mixed-precision training does (matmuls and convolutions in 16 bits), eager "
            "and backend alike; float32 throughout otherwise.",
        ),
    ) -> None:
        """Run real models eager and on a backend (forward + training step); compare and show coverage.

        Example: opbench check-model --backend my_kernels --device cpu --models bert,resnet
        """
        from opbench.backends.loader import BackendError, load_backend
        from opbench.models.check import check_model, cuda_graphs_usable
        from opbench.models.precision import autocast_dtype

        names = [m.strip() for m in models.split(",") if m.strip()]
        try:
            autocast_dtype(autocast)
        except ValueError as e:
            fail(f"--autocast: {e}")
            return
        if cuda_graphs:
            try:
                cuda_graphs_usable(device, time_steps)
            except ValueError as e:
                fail(f"--cuda-graphs: {e}")
                return
        try:
            be = load_backend(backend, device, kernel_version=kernel_version)
        except BackendError as e:
            fail(str(e))
            return
        serve = None
        if policy is not None:
            from opbench.backends.api import as_policy

            try:
                serve = as_policy(policy, policy_measure)
            except (OSError, ValueError, KeyError) as e:
                fail(f"--policy {policy}: {e}")
                return
        # in a log file the table must not be cut at 80 columns
        console = Console(width=None if sys.stdout.isatty() else 200)
        for k, v in be.load_errors.items():
            console.print(f"[yellow]load error[/] {k}: {v}", highlight=False)
        started = time.perf_counter()
        results = []
        runs = [False, True] if compile else [False]
        for name in names:
            for compiled in runs:
                try:
                    r = check_model(
                        name,
                        be,
                        device,
                        compile=compiled,
                        compile_backend=compile_backend,
                        scale=scale,
                        rtol=rtol,
                        time_steps=time_steps,
                        only_ops=[o.strip() for o in only.split(",")] if only else None,
                        allow_tf32=allow_tf32,
                        policy=serve,
                        cuda_graphs=cuda_graphs,
                        native=native,
                        autocast=autocast,
                    )
                except ValueError as e:
                    fail(str(e))
                    return
                results.append(r)
        precision = f", forward under autocast {autocast}" if autocast else ""
        table = Table(title=f"check-model: {be.name} on {device}{precision}")
        graph_cols = ("eager graph ms", "backend graph ms", "graph speedup") if cuda_graphs else ()
        for col in (
            "model",
            "mode",
            "result",
            "output err",
            "loss err",
            "grad err",
            "ops",
            "served",
            "calls served",
            "from C++",
            "eager ms/step",
            "backend ms/step",
            *graph_cols,
            "s",
        ):
            table.add_column(col)
        for r in results:
            verdict = "identical" if r.identical else ("ok" if r.ok else "MISMATCH")
            if r.error and not r.ok:
                verdict = f"[red]{r.error[:60]}[/]"
            fmt = lambda v: "-" if v is None else f"{v:.2e}"  # noqa: E731
            table.add_row(
                r.model,
                "compile" if r.compiled else "eager",
                verdict,
                fmt(r.output_max_abs),
                fmt(r.loss_abs),
                fmt(r.grad_max_abs),
                str(len(r.ops_called)) if r.ops_called else "-",
                str(len(r.served_ops)),
                "-" if r.served_call_share is None else f"{r.served_call_share:.0%}",
                "-" if r.native_call_share is None else f"{r.native_call_share:.0%}",
                "-" if r.eager_step_ms is None else f"{r.eager_step_ms:.2f}",
                "-" if r.backend_step_ms is None else f"{r.backend_step_ms:.2f}",
                *(_graph_cells(r) if cuda_graphs else ()),
                f"{r.seconds:.2f}",
            )
        console.print(table)
        for r in results:
            if r.timed_native_share is not None and r.native_call_share is not None:
                # the table's share is the checked step's: each signature's first call,
                # which launch replay does not serve yet
                console.print(
                    f"{r.model}: {r.timed_native_share:.0%} of a timed step's calls launched "
                    f"from C++ ({r.native_call_share:.0%} in the checked step)",
                    highlight=False,
                    soft_wrap=True,
                )
            for side, err in (("eager", r.eager_graph_error), ("backend", r.backend_graph_error)):
                if err:
                    console.print(
                        f"[yellow]no graph[/] {r.model} ({side}): {escape(err)}",
                        highlight=False,
                        soft_wrap=True,
                    )
        if show_ops:
            for r in results:
                if not r.coverage:
                    continue
                t = Table(
                    title=f"{r.model} ({'compile' if r.compiled else 'eager'}): ATen overloads"
                )
                for col in ("op", "model calls", "served", "from C++", "fell back",
                            "why not from C++"):  # fmt: skip
                    t.add_column(col)
                for c in r.coverage:
                    if c.served or c.fallback or be.name != "aten":
                        why = c.python_why if c.served > c.native else ""
                        t.add_row(c.op, str(c.calls), str(c.served), str(c.native),
                                  str(c.fallback), escape(why))  # fmt: skip
                console.print(t)
        console.print(f"total {time.perf_counter() - started:.2f} s")
        if json_out:
            json_out.write_text(json.dumps([r.to_dict() for r in results], indent=2))
        if not all(r.ok for r in results):
            raise typer.Exit(1)
