"""Program problems in the loop (``opbench agent --suite programs[:PATH]``): the model is
shown a KernelBench-format problem (``class Model``, ``get_inputs``, ``get_init_inputs``)
and asked for ``class ModelNew``; each answer is judged like any program candidate, by
``opbench run --problem P --candidate C`` in its own process (the candidate only ever
runs in that run's sandboxed worker), and the verdict comes back as feedback.

Targets are problem ids (``level1/19_relu``) or file stems (``19_relu``), as
``opbench run --suite programs --ops`` takes them; ``all`` is every problem of the suite.
The best answers land in ``OUT/best/<id>.py``, a ``--candidates`` folder mirroring the
suite, which the loop judges once more as a whole for ``OUT/summary.json``.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from opbench.agent.prompts import available_dsls, load_template
from opbench.run.bounded import run_bounded

__all__ = [
    "is_programs",
    "judge_program",
    "program_messages",
    "resolve_targets",
    "suite_root",
]


def is_programs(suite: str) -> bool:
    return suite == "programs" or suite.startswith("programs:")


def suite_root(suite: str) -> Path:
    """The folder of a ``programs[:PATH]`` suite (our own set without a PATH)."""
    from opbench.programs import loader

    _, _, path = suite.partition(":")
    return Path(path).expanduser() if path else loader.OWN_PROBLEMS


def resolve_targets(suite: str, names: list[str]) -> dict[str, Path]:
    """Problem id -> problem file for the names asked (``all``: every problem).
    Raises :class:`opbench.programs.loader.ProblemError` for an unknown name."""
    from opbench.programs import loader

    problems = loader.discover(suite_root(suite))
    if [n for n in names if n.strip()] != ["all"]:
        problems = loader.only(problems, names)
    return {p.problem_id: p.path for p in problems}


def program_messages(
    problem_id: str,
    path: Path,
    *,
    dsl: str = "triton",
    device: str = "cuda",
    templates: str | Path | None = None,
) -> list[dict[str, str]]:
    """The first request for one problem: the program rules and the problem's source,
    with an example kernel in the target DSL."""
    dsls = available_dsls(templates)
    if dsl not in dsls:
        raise ValueError(f"unknown DSL {dsl!r}; templates exist for {', '.join(dsls)}")
    fields = {
        "target": problem_id,
        "dsl_name": dsls[dsl],
        "device": device,
        "source": Path(path).read_text().strip(),
        "example": load_template(f"example_{dsl}.py", templates).strip(),
    }
    return [
        {"role": "system", "content": load_template("system_program.md", templates).strip()},
        {
            "role": "user",
            "content": load_template("task_program.md", templates).format(**fields).strip(),
        },
    ]


def feedback(
    problem_id: str, verdict: str, details: str, templates: str | Path | None = None
) -> dict[str, str]:
    text = load_template("feedback_program.md", templates).format(
        target=problem_id, verdict=verdict, details=details.strip()
    )
    return {"role": "user", "content": text.strip()}


def run_args(
    problem: Path | None,
    candidate: Path | None,
    run_dir: Path,
    *,
    device: str,
    perf: bool,
    extra: list[str],
) -> list[str]:
    """``opbench run`` for one problem's candidate (or, with ``problem`` None, ``extra``
    names the suite and candidates), quiet, its summary on stdout."""
    import sys

    args = [sys.executable, "-m", "opbench.cli", "run"]
    if problem is not None:
        args += ["--problem", str(problem), "--candidate", str(candidate)]
    args += [
        "--device", device, "--out", str(run_dir), "--quiet", "--json",
        "--perf" if perf else "--no-perf", *extra,
    ]  # fmt: skip
    return args


def judge_program(
    problem: Path,
    candidate: Path,
    run_dir: Path,
    *,
    device: str,
    perf: bool,
    timeout_s: float,
    extra: list[str] | None = None,
) -> dict[str, Any]:
    """The verdict on one ``ModelNew`` file: correct, speedups, and what to tell the model
    (the failure's category and message, the largest error)."""
    args = run_args(problem, candidate, run_dir, device=device, perf=perf, extra=extra or [])
    if run_dir.exists():
        args.append("--resume")
    try:
        proc = run_bounded(args, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"verdict": "judge_timeout", "correct": False, "details": "the judge timed out"}
    if proc.returncode not in (0, 1) or not proc.stdout.strip().startswith("{"):
        tail = (proc.stderr or proc.stdout)[-1500:]
        return {"verdict": "judge_error", "correct": False, "details": tail}
    summary = json.loads(proc.stdout)
    rec = next(iter((summary.get("problems") or {}).values()), None)
    if rec is None:
        why = next(iter((summary.get("not_runnable") or {}).values()), "no verdict")
        return {"verdict": f"not runnable: {why}", "correct": False, "details": str(why)}
    correct = bool(rec.get("correct"))
    speed = rec.get("speedup")
    if correct:
        verdict = "correct" + (f", speedup {speed:.3f}x over eager" if speed else "")
        if rec.get("speedup_compile"):
            verdict += f", {rec['speedup_compile']:.3f}x over torch.compile"
        details = ""
    else:
        verdict = f"not correct ({rec.get('category') or rec.get('status')})"
        details = f"[{rec.get('category') or rec.get('status')}] {rec.get('message') or ''}"
        if rec.get("max_abs_err") is not None:
            details += f"\nlargest absolute error: {rec['max_abs_err']:.3g}"
    return {
        "verdict": verdict,
        "correct": correct,
        "speedup": speed if correct else None,
        "speedup_compile": rec.get("speedup_compile") if correct else None,
        "failures": {} if correct else {rec.get("category") or rec.get("status"): 1},
        "details": details,
        "run_dir": str(run_dir),
    }
