"""Turning an agent run into training data: one JSON line per attempt, in the spirit of
KernelBook (operator, PyTorch reference, kernel code, verdict, speedup), from the
records ``opbench agent`` keeps (``OUT/records/<folder>/attempt_<k>.json``).

Each line: ``op`` (the ATen overload), ``schema``, ``reference`` (how PyTorch computes it:
``torch.ops.aten.<op>``), ``dsl``, ``attempt``, ``messages`` (the conversation that led to
the answer, with ``--with-messages``), ``answer``, ``code`` (None when the answer had
none), ``correct``, ``verdict``, ``failures`` (category counts), ``speedup``, ``tokens``.
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
    if summary_path.exists():
        dsl = json.loads(summary_path.read_text()).get("dsl", dsl)
    for folder in sorted(p for p in (out / "records").glob("*") if p.is_dir()):
        target = parse_folder_name(folder.name)
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
                "op": target,
                "schema": schema,
                "reference": f"torch.ops.aten.{target}",
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


def write_jsonl(out: Path, dest: Path, *, with_messages: bool = False) -> int:
    """Write :func:`iter_attempts` to ``dest``; returns the number of lines."""
    n = 0
    with dest.open("w") as f:
        for row in iter_attempts(out, with_messages=with_messages):
            f.write(json.dumps(row, default=str) + "\n")
            n += 1
    return n
