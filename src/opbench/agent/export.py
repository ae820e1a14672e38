"""Turning an agent run into training data: one JSON line per attempt, in the spirit of
KernelBook (operator, PyTorch reference, kernel code, verdict, speedup), from the
records ``opbench agent`` keeps (``OUT/records/<folder>/attempt_<k>.json``).

Each line: ``op`` (the ATen overload), ``schema``, ``reference`` (how PyTorch computes it:
``torch.ops.aten.<op>``), ``dsl``, ``attempt``, ``messages`` (the conversation that led to
the answer, with ``--with-messages``), ``answer``, ``code`` (None when the answer had
none), ``correct``, ``verdict``, ``failures`` (category counts), ``speedup``, ``tokens``.
For a program problem (``--suite programs``) ``program`` (its id) replaces ``op`` and
``reference`` is the problem file's source (``class Model``, ``get_inputs``).
With ``--inductor-baseline`` each operator also gets a row with ``baseline: inductor``:
the code ``torch.compile`` generates for it (Triton on CUDA, C++ on the CPU).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["iter_attempts", "write_jsonl"]


def iter_attempts(out: Path, *, with_messages: bool = False) -> Iterator[dict[str, Any]]:
    """Every recorded attempt of the agent run in ``out`` that got an answer."""
    from opbench.spec.ops import get_overload, parse_folder_name

    summary_path = out / "agent.json"
    dsl = "triton"
    problems: dict[str, str] = {}
    if summary_path.exists():
        agent = json.loads(summary_path.read_text())
        dsl = agent.get("dsl", dsl)
        problems = agent.get("problems") or {}
    records = out / "records"
    folders = sorted({f.parent for f in records.rglob("attempt_*.json")})
    for folder in folders:
        name = folder.relative_to(records).as_posix()
        program = problems.get(name)
        if program is not None:  # a program problem: its source is the reference
            target, schema = name, None
            path = Path(program)
            reference = path.read_text() if path.is_file() else program
        else:
            target = parse_folder_name(folder.name)
            reference = f"torch.ops.aten.{target}"
            try:
                schema = str(get_overload(target)._schema)
            except Exception:
                schema = None
        files = sorted(folder.glob("attempt_*.json"), key=lambda p: int(p.stem.split("_")[1]))
        for f in files:
            rec = json.loads(f.read_text())
            if "answer" not in rec:
                continue
            result = rec.get("result") or {}
            row: dict[str, Any] = {
                "program" if program is not None else "op": target,
                "schema": schema,
                "reference": reference,
                "dsl": dsl,
                "attempt": rec.get("attempt"),
                "answer": rec["answer"],
                "code": rec.get("code"),
                "correct": bool(result.get("correct")),
                "verdict": result.get("verdict"),
                "failures": result.get("failures") or {},
                "speedup": result.get("speedup"),
                "tokens": rec.get("tokens"),
            }
            if with_messages:
                row["messages"] = rec.get("messages")
            yield row


def write_jsonl(
    out: Path,
    dest: Path,
    *,
    with_messages: bool = False,
    inductor_device: str | None = None,
) -> int:
    """Write :func:`iter_attempts` to ``dest``, then, with ``inductor_device``, one
    baseline row per operator of the run: the code Inductor generates for it on that
    device (:mod:`opbench.agent.inductor`); returns the number of lines."""
    n = 0
    ops: list[str] = []
    with dest.open("w") as f:
        for row in iter_attempts(out, with_messages=with_messages):
            f.write(json.dumps(row, default=str) + "\n")
            n += 1
            if "op" in row and row["op"] not in ops:
                ops.append(row["op"])
        if inductor_device is not None:
            from opbench.agent.inductor import inductor_baseline

            suite = _agent_field(out, "suite", "opinfo")
            for op in ops:
                row = inductor_baseline(op, device=inductor_device, suite=suite)
                f.write(json.dumps(row, default=str) + "\n")
                n += 1
    return n


def _agent_field(out: Path, key: str, default: str) -> str:
    path = out / "agent.json"
    return json.loads(path.read_text()).get(key, default) if path.exists() else default
