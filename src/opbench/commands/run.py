"""CLI command: ``opbench run`` (registered on the typer app by opbench.cli).

Thin: parse flags into a :class:`~opbench.run.setup.RunRequest`, run it through
:func:`opbench.run.session.run` with a progress display, print the summary, and exit
with the status DESIGN.md names.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from opbench.commands.common import console, fail, out_console, state

__all__ = ["INCOMPLETE", "describe_coverage", "print_summary", "register"]

#: ``opbench run``'s exit status when some tests are ``judge_error``: their verdict is
#: missing, so neither "done" (0) nor "below the bar" (1) can be said of the run.
INCOMPLETE = 3


def register(app: typer.Typer) -> None:
    """Add ``run`` to the app."""

    @app.command("run")
    def run_cmd(
        suite: str = typer.Option(
            "smoke", help="smoke | opinfo | traces[:PATH] | torchbench[:PATH] | programs[:PATH]"
        ),
        backend: str = typer.Option(
            "aten", help="aten | PATH (kernel directory) | module:NAME[:FUNC]"
        ),
        device: str = typer.Option("cpu", help="cpu | cuda | cuda:N"),
        # Like the program-run options below (--candidates...), kept apart: operator-run flags
        ops: str = typer.Option(
            None, help="Comma list: exact overloads (add.Tensor) or bare ops (add)."
        ),
        dtypes: str = typer.Option(None, help="Comma list in trace names: f16,bf16,f32,..."),
        limit_per_op: int = typer.Option(
            None, help="At most N tests per overload (most used first)."
        ),
        trace_split: str = typer.Option(
            None,
            "--trace-split",
            help="traces suite: only the 'tuning' or the 'heldout' half (split by model; "
            "held-out rows are those no tuning model uses).",
        ),
        shard: str = typer.Option(
            None,
            "--shard",
            help="K/N: judge only part K of N of the selected tests (a stable split by test "
            "id, after --limit-per-op): the parts are disjoint and together the whole run, "
            "so a run too long for one machine's lend is judged part by part and the parts' "
            "reports merged.",
        ),
        profile: str = typer.Option("quick", help="opinfo profile: quick | full"),
        perf: bool = typer.Option(
            True, "--perf/--no-perf", help="Time reference against candidate."
        ),
        out: Path = typer.Option(None, help="Run directory (default runs/run-<time>)."),
        workers: int = typer.Option(
            None,
            help="Worker processes (one per GPU, round-robin); default 1, and with "
            "--executor ray one per GPU (CPU) of the cluster.",
        ),
        executor: str = typer.Option("local", help="local | ray"),
        ray_address: str = typer.Option(None, help="Ray cluster address for --executor ray."),
        resume: bool = typer.Option(False, help="Continue an interrupted run in --out."),
        seed: int = typer.Option(0, help="Seed for every generated input."),
        traces: str = typer.Option(
            None, help="Trace folder, .txt or parquet (else OPBENCH_TRACES / download)."
        ),
        fail_under: float = typer.Option(
            None, help="Exit 1 when the correctness score is below this."
        ),
        fail_under_perf: float = typer.Option(
            None, help="Exit 1 when the performance score (device-time geomean) is below this."
        ),
        junit: Path = typer.Option(None, help="Also write the run as JUnit XML (one case per op)."),
        json_out: bool = typer.Option(
            False, "--json", help="Print summary.json on stdout instead of the table."
        ),
        quiet: bool = typer.Option(False, "--quiet", help="No progress display and no table."),
        test_timeout: float = typer.Option(
            120.0, help="Seconds before a test is killed as a timeout."
        ),
        max_crashes_per_op: int = typer.Option(
            3, help="Skip an op's remaining tests after N crashes/hangs."
        ),
        sandbox: str = typer.Option("auto", help="auto | off | required"),
        kernel_version: str = typer.Option(
            None, help="Pick implementation version (e.g. v2) in a kernel directory."
        ),
        rtol_scale: float = typer.Option(1.0, help="Scale the correctness tolerances (>1 looser)."),
        allow_pytorch: bool = typer.Option(
            False, help="Kernels calling PyTorch compute: warn, not fail."
        ),
        python_calls: bool = typer.Option(
            False,
            "--python-calls",
            help="Call every kernel as its Python function. By default, on CUDA, a kernel "
            "that declares a native launch is called through opbench's C++ gate, as a model "
            "calls it (docs/judge.md).",
        ),
        allow: list[str] = typer.Option(
            None,
            "--allow",
            help="Exempt a static-scan rule (repeatable; e.g. --allow threads). Its findings "
            "are still shown, marked allowed, and the exemption is recorded in the run.",
        ),
        memory_limit_mb: int = typer.Option(
            None, help="Kill a worker whose resident memory exceeds this."
        ),
        rerun_failed: Path = typer.Option(
            None, help="Re-run only the tests that failed in this run dir."
        ),
        overhead_dominated: str = typer.Option(
            "include", help="include | exclude | only (perf canary)."
        ),
        allow_tf32: bool = typer.Option(
            False,
            "--allow-tf32",
            help="Let float32 matmuls and convolutions use TF32 on both sides (default: IEEE "
            "float32, which slows eager's float32 convolutions on NVIDIA GPUs).",
        ),
        # Like commands.backends.init_cmd's and commands.programs.lint_problems_cmd's
        # options, kept apart: each command owns its flags and their help
        problem: Path = typer.Option(
            None, help="One program problem file (class Model, get_inputs, get_init_inputs)."
        ),
        candidate: Path = typer.Option(None, help="With --problem: the file with class ModelNew."),
        candidates: Path = typer.Option(
            None, help="With --suite programs[:PATH]: a folder of ModelNew files, levelN/<file>.py."
        ),
        levels: str = typer.Option(None, help="Program levels to run, e.g. 1,2 (levelN folders)."),
        size: str = typer.Option(
            None, help="Program problem size: small | full (default full on cuda, small on cpu)."
        ),
        compile_baseline: bool = typer.Option(
            False, "--compile-baseline", help="Also time torch.compile(Model) as a second baseline."
        ),
        max_problem_bytes: int = typer.Option(
            None,
            help="Skip a program whose inputs and parameters exceed this many bytes as "
            "not_runnable (default: 1/8 of GPU memory, 2 GiB on cpu).",
        ),
        n_correctness: int = typer.Option(
            5, help="Program problems: input sets (seeds) each candidate must get right."
        ),
    ) -> None:
        """Run a suite against a backend and write RUN_DIR/summary.json and results.sqlite.

        Example: opbench run --suite traces --traces ../shared/traces --backend aten --device cpu --ops relu,add --limit-per-op 3 --no-perf --out runs/first

        Programs (KernelBench format): opbench run --suite programs:../shared/kernelbench --levels 1 --candidates my_models --device cuda --compile-baseline; one file: opbench run --problem P.py --candidate C.py

        Exit status: 0 done (and above --fail-under / --fail-under-perf if given); 1 below the bar; 2 bad usage or input; 3 incomplete: the harness could not plan or judge some tests (judge_error in summary.json, left out of every score) or left some unrecorded (unfinished: --resume runs them), whatever the scores.
        """
        if problem is None and not suite.startswith("programs"):
            from opbench.run.judge_template import start_for_run

            # the judging processes' template imports torch beside this process's imports
            start_for_run(device, suite)
        from opbench.run.session import RunError, RunRequest, parse_dtypes
        from opbench.spec.ops import UnknownOpError

        try:
            # Like judge.checks.Judging.start's and programs.judge._judge_trials'
            # keywords, kept apart: one name each, passed on to another record
            req = RunRequest(
                suite=suite,
                backend=backend,
                device=device,
                ops=[o for o in ops.split(",") if o.strip()] if ops else None,
                dtypes=parse_dtypes([dtypes] if dtypes else None),
                limit_per_op=limit_per_op,
                trace_split=trace_split,
                shard=shard,
                profile=profile,
                perf=perf,
                out=out,
                workers=_workers(workers, executor),
                executor=executor,
                ray_address=ray_address,
                resume=resume,
                seed=seed,
                traces=traces,
                test_timeout_s=test_timeout,
                max_crashes_per_op=max_crashes_per_op,
                sandbox=sandbox,
                kernel_version=kernel_version,
                rtol_scale=rtol_scale,
                allow_pytorch=allow_pytorch,
                python_calls=python_calls,
                allow_rules=_scan_rules(allow),
                memory_limit_mb=memory_limit_mb,
                rerun_failed=rerun_failed,
                overhead_dominated=overhead_dominated,
                allow_tf32=allow_tf32,
                problem=problem,
                candidate=candidate,
                candidates=candidates,
                levels=[x.strip() for x in levels.split(",") if x.strip()] if levels else None,
                size=size,
                compile_baseline=compile_baseline,
                max_problem_bytes=max_problem_bytes,
                n_correctness=n_correctness,
            )
            if fail_under_perf is not None and not perf:
                raise ValueError("--fail-under-perf needs timing: drop --no-perf")
            summary = _run_with_progress(req, quiet=quiet or json_out)
        except (RunError, UnknownOpError, FileNotFoundError, ValueError) as e:
            if state["debug"]:
                raise
            fail(str(e))
            return
        except Exception as e:
            if state["debug"]:
                raise
            name = type(e).__name__
            if name in (
                "WorkerStartError",
                "BackendError",
                "SandboxUnavailable",
                "TraceFormatError",
                "ArgsParseError",
                "DownloadError",
            ):
                fail(str(e).splitlines()[0] if str(e) else name)
            raise
        if junit is not None:
            _write_junit(junit, summary)
        if json_out:
            sys.stdout.write(json.dumps(summary, indent=2, default=str) + "\n")
        elif not quiet:
            print_summary(summary)
        failed = False
        score = summary.get("correctness_score")
        if fail_under is not None and (score is None or score < fail_under):
            console.print(f"correctness score {score} is below --fail-under {fail_under}")
            failed = True
        perf_score = summary.get("performance_score")
        if fail_under_perf is not None and (perf_score is None or perf_score < fail_under_perf):
            console.print(
                f"performance score {perf_score} is below --fail-under-perf {fail_under_perf}"
            )
            failed = True
        if summary.get("judge_errors"):
            console.print(
                f"incomplete: {summary['judge_errors']} test(s) are judge_error (the harness "
                f"could not plan or judge them); exit {INCOMPLETE}"
            )
            raise typer.Exit(INCOMPLETE)
        if summary.get("unfinished"):
            console.print(
                "incomplete: a harness error left tests unrecorded (summary.json "
                f"'unfinished'); run the same command with --resume; exit {INCOMPLETE}"
            )
            raise typer.Exit(INCOMPLETE)
        if failed:
            raise typer.Exit(1)


def _workers(given: int | None, executor: str) -> int:
    """``--workers`` as the run takes it: as given, else 1 locally and 0 for Ray (one
    slot per GPU or CPU of the cluster: ``RayExecutor``). A ``--workers 1`` given to
    Ray used to mean the whole cluster as well, since 1 was the default."""
    if given is not None:
        if given < 1:
            fail(f"--workers must be at least 1, not {given}")
        return given
    return 0 if executor == "ray" else 1


def _write_junit(path: Path, summary: dict[str, Any]) -> None:
    from opbench.report.junit import write_junit
    from opbench.run.store import ResultStore

    store = ResultStore(Path(summary["run_dir"]) / "results.sqlite")
    try:
        write_junit(path, summary, store.results())
    finally:
        store.close()


def _run_with_progress(req: Any, quiet: bool = False) -> dict[str, Any]:
    from opbench.run.session import run

    if quiet:
        return run(req, lambda kind, payload: None)

    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),  # from the rate so far; unknown while the suite is built
    )
    with Progress(*columns, console=console, transient=False) as bar:
        task = bar.add_task("building suite", total=None, status="")
        counts: dict[str, int] = {}
        # Not a terminal (a log file, CI, a remote job): the bar is drawn only at the end,
        # so each finished test is also a plain line, and a run cut off by a time limit
        # still shows how far it got.
        plain = not console.is_terminal
        where = {"done": 0, "total": 0}

        def on_progress(kind: str, payload: Any) -> None:
            if kind == "phase":
                bar.update(task, description=str(payload))
            elif kind == "coverage":
                console.print(describe_coverage(payload))
            elif kind == "start":
                where.update(done=payload["done"], total=payload["total"])
                if payload["done"]:  # --resume: the statuses count this part's results
                    counts["resumed"] = payload["done"]
                bar.update(
                    task, description="testing", total=payload["total"], completed=payload["done"]
                )
            elif kind == "result":
                key = payload.category or payload.status
                counts[key] = counts.get(key, 0) + 1
                status = " ".join(f"{k}={v}" for k, v in sorted(counts.items()))
                bar.update(task, advance=1, status=status[:60])
                where["done"] += 1
                if plain:
                    took = f" {payload.duration_s:.2f} s" if payload.duration_s else ""
                    console.print(
                        f"[{where['done']}/{where['total']}] {payload.test_id}: {key}{took}",
                        markup=False,
                        highlight=False,
                        soft_wrap=True,
                    )

        return run(req, on_progress)


def describe_coverage(cov: dict[str, Any]) -> str:
    """One line: ``4,034 tests · 817 overloads · 384 operators · float32 2,197, ...``."""

    def counts(d: dict[str, int]) -> str:
        return ", ".join(f"{k} {v:,}" for k, v in d.items())

    parts = [f"{cov.get('tests', 0):,} tests", f"{cov.get('overloads', 0):,} overloads"]
    parts.append(f"{cov.get('operators', 0):,} operators")
    if cov.get("opinfos"):
        parts.append(f"{cov['opinfos']:,} OpInfos")
    if cov.get("by_dtype"):
        parts.append(counts(cov["by_dtype"]))
    if cov.get("by_variant"):
        parts.append(counts(cov["by_variant"]))
    return "suite: " + " · ".join(parts)


def print_summary(summary: dict[str, Any]) -> None:
    """The short table at the end of a run."""
    from opbench.report.tables import print_summary as _print

    _print(summary, out_console)


def _scan_rules(allow: list[str] | None) -> list[str]:
    """``--allow`` values checked against the static scan's rule table."""
    from opbench.judge.static_scan import RULES

    rules = sorted({r.strip() for item in allow or [] for r in item.split(",") if r.strip()})
    unknown = [r for r in rules if r not in RULES]
    if unknown:
        raise ValueError(
            f"unknown static-scan rule(s) {', '.join(unknown)}; the rules are: " + ", ".join(RULES)
        )
    return rules
