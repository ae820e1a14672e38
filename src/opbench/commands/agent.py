"""CLI command ``opbench agent``: a model writes kernels from the judge's feedback."""

from __future__ import annotations

from pathlib import Path

import typer

from opbench.commands.common import fail

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add ``opbench agent`` to the app."""

    @app.command("agent")
    def agent_cmd(
        ops: str = typer.Option(..., help="Comma list of overloads (relu.default,add.Tensor)."),
        model: str = typer.Option(..., help="The model name the endpoint serves."),
        base_url: str = typer.Option(
            "https://api.openai.com/v1", help="An OpenAI-compatible chat-completions endpoint."
        ),
        api_key_env: str = typer.Option(
            "OPENAI_API_KEY", help="Environment variable holding the key (none for loopback)."
        ),
        suite: str = typer.Option(
            "opinfo",
            help="The suite each attempt is judged on; programs[:PATH] asks for ModelNew "
            "for the program problems --ops names (ids or file stems, or all).",
        ),
        dtypes: str = typer.Option(None, help="Narrow the suite's dtypes (f32,bf16,...)."),
        device: str = typer.Option("cpu", help="cpu | cuda | cuda:N"),
        attempts: int = typer.Option(3, help="Attempts per operator (feedback between)."),
        concurrency: int = typer.Option(4, help="Operators worked on at once."),
        perf: bool = typer.Option(
            False, "--perf/--no-perf", help="Time each correct attempt and keep improving."
        ),
        traces: str = typer.Option(None, help="Traces for real dtypes and shapes in prompts."),
        templates: Path = typer.Option(None, help="A folder of prompt templates overriding ours."),
        dsl: str = typer.Option(
            "triton",
            help="Kernel language asked for: triton, cuda or cpp (load_inline), or one a "
            "--templates folder adds (dsl_NAME.md + example_NAME.py: Helion, CuTe, ...).",
        ),
        timeout: float = typer.Option(300.0, help="Seconds per request."),
        retries: int = typer.Option(3, help="Retries per request (with backoff)."),
        temperature: float = typer.Option(None, help="Sampling temperature."),
        max_tokens: int = typer.Option(None, help="Most tokens per answer."),
        price_in: float = typer.Option(None, help="USD per million prompt tokens (for cost)."),
        price_out: float = typer.Option(None, help="USD per million answer tokens."),
        out: Path = typer.Option(Path("runs/agent"), help="Output folder."),
        resume: bool = typer.Option(False, help="Reuse stored answers and verdicts in --out."),
    ) -> None:
        """Have a model write a kernel per operator, judged and fed back up to --attempts
        times; the best ones land in OUT/best (a kernel directory for --backend).

        Example: opbench agent --ops relu.default --model qwen --base-url http://localhost:8000/v1
        """
        from rich.console import Console

        from opbench.agent.client import ChatClient, ClientError, Endpoint
        from opbench.agent.loop import AgentOptions, run_agent
        from opbench.programs.loader import ProblemError

        console = Console(stderr=True)
        endpoint = Endpoint(
            base_url=base_url, model=model, api_key_env=api_key_env, timeout_s=timeout,
            max_retries=retries, temperature=temperature, max_tokens=max_tokens,
            price_in_per_mtok=price_in, price_out_per_mtok=price_out,
        )  # fmt: skip
        opts = AgentOptions(
            ops=[o.strip() for o in ops.split(",") if o.strip()], out=out, suite=suite,
            device=device, dtypes=dtypes, attempts=attempts, concurrency=concurrency,
            perf=perf, traces=traces, templates=str(templates) if templates else None,
            resume=resume, dsl=dsl,
        )  # fmt: skip
        from opbench.agent.prompts import available_dsls

        if dsl not in available_dsls(opts.templates):
            fail(
                f"unknown --dsl {dsl!r}: templates exist for "
                f"{', '.join(available_dsls(opts.templates))} (add one with dsl_{dsl}.md and "
                f"example_{dsl}.py in a --templates folder)"
            )

        def progress(kind: str, p: dict) -> None:
            if kind == "attempt":
                mark = "[green]correct[/]" if p.get("correct") else "[red]not correct[/]"
                console.print(f"{p['op']} attempt {p['attempt']}: {mark} · {p.get('verdict')}")

        try:
            client = ChatClient(endpoint)
            summary = run_agent(opts, client, progress)
        except ClientError as e:
            fail(f"{e.kind}: {e}")
            return
        except ProblemError as e:  # --suite programs: an unknown problem or folder
            fail(str(e))
            return
        from rich.table import Table

        table = Table(title=f"opbench agent · {model} · {suite} on {device}")
        table.add_column("op", overflow="fold")
        table.add_column("attempts (✓ correct, ✗ not)", no_wrap=True)
        table.add_column("first correct", justify="right")
        table.add_column("best", justify="right")
        table.add_column("best speedup", justify="right")
        for op, r in summary["ops"].items():
            marks = " ".join("✓" if a.get("correct") else "✗" for a in r["attempts"])
            sp = r.get("best_speedup")
            table.add_row(
                op, marks, str(r.get("first_correct_attempt") or "-"),
                str(r.get("best_attempt") or "-"), "-" if sp is None else f"{sp:.3f}",
            )  # fmt: skip
        Console().print(table)
        console.print(
            f"{summary['correct']}/{len(opts.ops)} operators correct · pass@k "
            + ", ".join(f"{k}: {v:.2f}" for k, v in summary["pass_at"].items() if v is not None)
            + f" · tokens {summary['usage']['prompt_tokens']}+{summary['usage']['completion_tokens']}"
            + f" · best kernels in {summary['best_dir']}"
            + (
                " (judged again: OUT/summary.json)"
                if (summary.get("best_run") or {}).get("run_dir")
                else ""
            )
        )

    @app.command("agent-export")
    def agent_export_cmd(
        out: Path = typer.Argument(..., help="An opbench agent output folder."),
        jsonl: Path = typer.Option(..., "--jsonl", help="The JSON-lines file to write."),
        with_messages: bool = typer.Option(
            False, "--with-messages", help="Include the conversation of each attempt."
        ),
        inductor_baseline: str = typer.Option(
            None,
            "--inductor-baseline",
            help="A device (cuda, cpu): add per operator the code torch.compile generates "
            "for it on the run's suite's first case (Triton on CUDA, C++ on the CPU).",
        ),
    ) -> None:
        """Export every attempt of an agent run as JSON lines (op, schema, reference,
        code, verdict, speedup, tokens): training data in the spirit of KernelBook.

        Example: opbench agent-export runs/agent --jsonl attempts.jsonl
        """
        from opbench.agent.export import write_jsonl

        if not (out / "records").is_dir():
            fail(f"{out} holds no agent records (expected {out / 'records'})")
            return
        n = write_jsonl(out, jsonl, with_messages=with_messages, inductor_device=inductor_baseline)
        typer.echo(f"wrote {n} attempts to {jsonl}", err=True)
