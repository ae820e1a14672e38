"""The kernel-writing loop: ask a model for a kernel, judge it, feed the verdict back,
up to ``attempts`` times per operator, many operators in parallel.

Per operator: the first request is :func:`opbench.agent.prompts.task_messages`; each
answer's last ``python`` block is written as a new version of the operator's folder in
``OUT/kernels`` (``<folder>_implementation_v<k>.py``) and judged by ``opbench run`` in its
own process (the same isolated, sandboxed workers, guard, static scan and timing as any
run; the loop never imports a candidate); the verdict, with the failing tests' inputs in
the trace format, their categories and messages, becomes the next request. The best
attempt (correct first, then fastest) is copied to ``OUT/best``, a kernel directory that
``--backend`` loads.

Everything is recorded under ``OUT/records/<folder>/attempt_<k>.json`` (the messages
sent, the answer, its tokens, the code and the verdict), written as soon as each part
exists: ``--resume`` reuses a stored answer instead of asking again, and a stored verdict
instead of judging again.

With ``--suite programs[:PATH]`` the targets are program problems instead
(:mod:`opbench.agent.programs`): the model writes ``ModelNew``, each answer is judged by
``opbench run --problem P --candidate C``, and ``OUT/best`` mirrors the suite
(``<id>.py``, a ``--candidates`` folder).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opbench.agent import programs
from opbench.agent.client import ChatClient, ClientError
from opbench.agent.prompts import NoCodeBlock, extract_code, feedback_message, task_messages
from opbench.run.bounded import run_bounded

__all__ = ["AgentOptions", "FATAL_KINDS", "run_agent"]

#: Client errors that no retry or other operator can get past: the run stops (exit 2).
FATAL_KINDS = frozenset({"unreachable", "auth", "missing_key", "missing_dependency"})
#: Failing tests quoted back to the model per attempt.
FEEDBACK_TESTS = 5


@dataclass
class AgentOptions:
    ops: list[str]
    out: Path
    suite: str = "opinfo"
    device: str = "cpu"
    dtypes: str | None = None
    attempts: int = 3
    concurrency: int = 4
    perf: bool = False
    dsl: str = "triton"
    traces: str | None = None
    templates: str | None = None
    resume: bool = False
    judge_timeout_s: float = 1800.0
    extra_run_args: list[str] = field(default_factory=list)
    #: for ``--suite programs[:PATH]``: problem id -> problem file (set by run_agent)
    problems: dict[str, Path] = field(default_factory=dict)


def _folder(target: str) -> str:
    from opbench.spec.ops import folder_name

    return folder_name(target)


def _run_args(opts: AgentOptions, backend: Path, ops: list[str], run_dir: Path) -> list[str]:
    """The ``opbench run`` command judging ``ops`` of ``backend`` with the loop's suite,
    device, dtypes and timing, into ``run_dir`` (quiet: the summary comes back on stdout)."""
    args = [
        sys.executable, "-m", "opbench.cli", "run", "--suite", opts.suite, "--backend",
        str(backend), "--ops", ",".join(ops), "--device", opts.device, "--out", str(run_dir),
        "--quiet", "--json", "--perf" if opts.perf else "--no-perf", *opts.extra_run_args,
    ]  # fmt: skip
    if opts.dtypes:
        args += ["--dtypes", opts.dtypes]
    if opts.traces and opts.suite.startswith("traces"):
        args += ["--traces", opts.traces]
    return args


def _judge(opts: AgentOptions, target: str, version: int, run_dir: Path) -> dict[str, Any]:
    """``opbench run`` on one version of one operator, in its own process."""
    args = _run_args(opts, opts.out / "kernels", [target], run_dir)
    args += ["--kernel-version", f"v{version}"]
    if run_dir.exists():
        args.append("--resume")
    try:
        proc = run_bounded(args, timeout=opts.judge_timeout_s)
    except subprocess.TimeoutExpired:
        return {"verdict": "judge_timeout", "correct": False, "details": "the judge timed out"}
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout)[-1500:]
        return {"verdict": "judge_error", "correct": False, "details": tail}
    summary = json.loads(proc.stdout)
    op = (summary.get("ops") or {}).get(f"aten.{target}") or {}
    if not op:  # the overload has no test in this suite, or it is a bare op
        ops = summary.get("ops") or {}
        correct = bool(ops) and all(v.get("correct") for v in ops.values())
        speedups = [v.get("speedup") for v in ops.values() if v.get("speedup")]
        op = {
            "correct": correct,
            "tests": sum(v.get("tests", 0) for v in ops.values()),
            "passed": sum(v.get("passed", 0) for v in ops.values()),
            "failures": {},
            "speedup": min(speedups) if speedups and correct else None,
        }
        for v in ops.values():
            for k, n in (v.get("failures") or {}).items():
                op["failures"][k] = op["failures"].get(k, 0) + n
    failing = _failing_tests(run_dir / "results.sqlite")
    failures = ", ".join(f"{k} x{n}" for k, n in (op.get("failures") or {}).items())
    verdict = (
        f"correct on all {op.get('tests', 0)} tests"
        + (f", speedup {op['speedup']:.3f}x over eager" if op.get("speedup") else "")
        if op.get("correct")
        else f"not correct: {op.get('passed', 0)} of {op.get('tests', 0)} tests pass"
        + (f" ({failures})" if failures else "")
    )
    return {
        "verdict": verdict,
        "correct": bool(op.get("correct")),
        "speedup": op.get("speedup"),
        "failures": op.get("failures") or {},
        "details": _describe_failures(failing),
        "run_dir": str(run_dir),
    }


def _failing_tests(db: Path) -> list[dict[str, Any]]:
    if not db.exists():
        return []
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = con.execute(
            "select test_id, args, status, category, message, max_abs_err from results "
            "where status not in ('passed', 'skipped', 'judge_error') order by test_id"
        ).fetchall()
    finally:
        con.close()
    keys = ("test_id", "args", "status", "category", "message", "max_abs_err")
    return [dict(zip(keys, r)) for r in rows]


def _describe_failures(failing: list[dict[str, Any]]) -> str:
    if not failing:
        return ""
    lines = [f"{len(failing)} failing tests; the first {min(len(failing), FEEDBACK_TESTS)}:"]
    for t in failing[:FEEDBACK_TESTS]:
        msg = " ".join((t.get("message") or "").split())[:600]
        lines.append(f"- [{t.get('category') or t.get('status')}] inputs {t['args'][:400]}")
        if msg:
            lines.append(f"  {msg}")
    return "\n".join(lines)


class _Recorder:
    """One JSON file per attempt, rewritten as it fills in (atomic replace)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, folder: str, k: int) -> Path:
        return self.root / folder / f"attempt_{k}.json"

    def load(self, folder: str, k: int) -> dict[str, Any]:
        p = self.path(folder, k)
        return json.loads(p.read_text()) if p.exists() else {}

    def save(self, folder: str, k: int, record: dict[str, Any]) -> None:
        p = self.path(folder, k)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_suffix(".tmp")
        tmp.write_text(json.dumps(record, indent=1, default=str))
        tmp.replace(p)


def _better(a: dict[str, Any] | None, b: dict[str, Any]) -> bool:
    """Is attempt ``b`` better than ``a``: correct first, then faster."""
    if a is None:
        return True
    if b["correct"] != a["correct"]:
        return b["correct"]
    return (b.get("speedup") or 0) > (a.get("speedup") or 0)


def _one_op(
    target: str,
    opts: AgentOptions,
    client: ChatClient,
    rec: _Recorder,
    progress: Callable[[str, dict[str, Any]], None],
) -> dict[str, Any]:
    program = opts.problems.get(target)
    if program is not None:
        folder = target  # the problem id: levelN/<name>
        messages = programs.program_messages(
            target, program, dsl=opts.dsl, device=opts.device, templates=opts.templates
        )
    else:
        folder = _folder(target)
        messages = task_messages(
            target, dsl=opts.dsl, device=opts.device, traces=opts.traces, templates=opts.templates
        )
    best: dict[str, Any] | None = None
    history: list[dict[str, Any]] = []
    for k in range(1, opts.attempts + 1):
        record = rec.load(folder, k) if opts.resume else {}
        if "answer" not in record:
            try:
                reply = client.complete(messages)
            except ClientError as e:
                if e.kind in FATAL_KINDS:
                    raise
                record = {"attempt": k, "messages": messages, "error": f"{e.kind}: {e}"}
                rec.save(folder, k, record)
                history.append({"attempt": k, "correct": False, "verdict": f"api_error ({e.kind})"})
                continue
            record = {
                "attempt": k,
                "messages": messages,
                "answer": reply.text,
                "tokens": {"prompt": reply.prompt_tokens, "completion": reply.completion_tokens},
                "cost_usd": reply.cost_usd,
                "latency_s": round(reply.latency_s, 3),
            }
            rec.save(folder, k, record)
        answer = record["answer"]
        if "result" not in record:
            try:
                code = extract_code(answer)
            except NoCodeBlock as e:
                result = {"verdict": "no_code", "correct": False, "details": str(e)}
            else:
                run_dir = opts.out / "runs" / folder / f"v{k}"
                if program is not None:
                    file = opts.out / "candidates" / folder / f"v{k}.py"
                else:
                    file = opts.out / "kernels" / folder / f"{folder}_implementation_v{k}.py"
                file.parent.mkdir(parents=True, exist_ok=True)
                file.write_text(code)
                record["code"] = code
                if program is not None:
                    result = programs.judge_program(
                        program, file, run_dir, device=opts.device, perf=opts.perf,
                        timeout_s=opts.judge_timeout_s, extra=opts.extra_run_args,
                    )  # fmt: skip
                else:
                    result = _judge(opts, target, k, run_dir)
            record["result"] = result
            rec.save(folder, k, record)
        result = record["result"]
        entry = {"attempt": k, **{x: result.get(x) for x in ("correct", "speedup", "verdict")}}
        history.append(entry)
        progress("attempt", {"op": target, **entry})
        if record.get("code") and _better(best, {**result, "attempt": k}):
            best = {**result, "attempt": k, "code": record["code"]}
        if result["correct"] and not opts.perf:
            break
        tell = programs.feedback if program is not None else feedback_message
        messages = [
            *messages,
            {"role": "assistant", "content": answer},
            tell(target, result["verdict"], result.get("details") or "", opts.templates),
        ]
    if best is not None and best["correct"]:
        if program is not None:
            dest = opts.out / "best" / f"{folder}.py"
        else:
            dest = opts.out / "best" / folder / f"{folder}_implementation.py"
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(best["code"])
    first_correct = next((h["attempt"] for h in history if h["correct"]), None)
    return {
        "attempts": history,
        "correct": bool(best and best["correct"]),
        "first_correct_attempt": first_correct,
        "best_attempt": best["attempt"] if best else None,
        "best_speedup": best.get("speedup") if best and best["correct"] else None,
    }


def _judge_best(opts: AgentOptions, ops: list[str]) -> dict[str, Any] | None:
    """Judge ``OUT/best`` as one backend over the operators it holds, like any run, and
    keep that run's ``summary.json`` as ``OUT/summary.json`` (the DESIGN.md schema)."""
    run_dir = opts.out / "best_run"
    shutil.rmtree(run_dir, ignore_errors=True)
    if opts.problems:
        suite = ["--suite", opts.suite, "--candidates", str(opts.out / "best")]
        args = programs.run_args(
            None, None, run_dir, device=opts.device, perf=opts.perf,
            extra=[*suite, "--ops", ",".join(sorted(ops)), *opts.extra_run_args],
        )  # fmt: skip
    else:
        args = _run_args(opts, opts.out / "best", sorted(ops), run_dir)
    try:
        proc = run_bounded(args, timeout=opts.judge_timeout_s)
    except subprocess.TimeoutExpired:
        return {"error": "the judge timed out"}
    summary_path = run_dir / "summary.json"
    if proc.returncode != 0 or not summary_path.exists():
        return {"error": (proc.stderr or proc.stdout)[-1500:]}
    shutil.copyfile(summary_path, opts.out / "summary.json")
    s = json.loads(summary_path.read_text())
    return {
        "run_dir": str(run_dir),
        **{
            k: s.get(k)
            for k in ("correctness_score", "performance_score", "performance_score_host")
        },
    }


def pass_at(results: dict[str, dict[str, Any]], k: int) -> float | None:
    """Share of operators with a correct kernel within their first ``k`` attempts
    (KernelBench's greedy analysis over sequential attempts)."""
    if not results:
        return None
    ok = sum(
        1
        for r in results.values()
        if r.get("first_correct_attempt") is not None and r["first_correct_attempt"] <= k
    )
    return ok / len(results)


def run_agent(
    opts: AgentOptions,
    client: ChatClient,
    progress: Callable[[str, dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Run the loop over ``opts.ops``; returns (and writes to ``OUT/agent.json``) the
    per-op results, pass@k over attempts and the token usage. Raises
    :class:`~opbench.agent.client.ClientError` for a fatal endpoint error."""
    report = progress or (lambda kind, payload: None)
    if programs.is_programs(opts.suite):
        opts.problems = programs.resolve_targets(opts.suite, opts.ops)
        opts.ops = list(opts.problems)
    opts.out.mkdir(parents=True, exist_ok=True)
    if opts.out.joinpath("best").exists() and not opts.resume:
        shutil.rmtree(opts.out / "best")
    rec = _Recorder(opts.out / "records")
    lock = threading.Lock()
    results: dict[str, dict[str, Any]] = {}

    def work(target: str) -> None:
        r = _one_op(target, opts, client, rec, report)
        with lock:
            results[target] = r
        report("op", {"op": target, **r})

    with ThreadPoolExecutor(max(1, opts.concurrency), "opbench-agent") as pool:
        for f in [pool.submit(work, t) for t in opts.ops]:
            f.result()  # re-raises a fatal client error
    best_ops = [t for t, r in results.items() if r["correct"]]
    best_run = _judge_best(opts, best_ops) if best_ops else None
    summary = {
        "ops": dict(sorted(results.items())),
        "best_run": best_run,
        "correct": sum(r["correct"] for r in results.values()),
        "pass_at": {str(k): pass_at(results, k) for k in range(1, opts.attempts + 1)},
        "usage": client.usage.to_dict(),
        "model": client.endpoint.model,
        "base_url": client.endpoint.base_url,
        "suite": opts.suite,
        "device": opts.device,
        "dsl": opts.dsl,
        "problems": {k: str(v) for k, v in opts.problems.items()},
        "best_dir": str(opts.out / "best"),
    }
    (opts.out / "agent.json").write_text(json.dumps(summary, indent=1, default=str))
    return summary
