"""The traces suite as a table: the fields of the published TorchBench suite.

Owns :data:`DATASET_FIELDS`, :func:`case_uuid` (BackendBench's id of an (op, args)
pair), :func:`dataset_rows` (one row per case), :func:`write_dataset` (``.parquet`` or
``.json``, replaced atomically) and :func:`dataset_summary` (the counts ``opbench
dataset`` prints). Works on :class:`~opbench.suites.case.Case` lists built by
:func:`opbench.suites.traces.build_trace_cases`.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from opbench.suites.case import Case

__all__ = ["DATASET_FIELDS", "case_uuid", "dataset_rows", "dataset_summary", "write_dataset"]

#: Columns of the dataset table, in order (the published TorchBench suite's fields).
DATASET_FIELDS: tuple[str, ...] = (
    "uuid",
    "op_name",
    "args",
    "runnable",
    "included_in_benchmark",
    "why_excluded",
    "is_synthetic",
    "runtime_ms",
    "relative_runtime_to_kernel_launch",
    "is_overhead_dominated_op",
    "count",
    "in_models",
    "in_models_count",
)


def case_uuid(op: str, args: str) -> str:
    """Stable id of an (op, args) pair: sha256 of args + ``aten.`` op (BackendBench's recipe)."""
    return hashlib.sha256(args.encode() + f"aten.{op}".encode()).hexdigest()


def dataset_rows(cases: Iterable[Case]) -> list[dict[str, Any]]:
    """One row per case with exactly :data:`DATASET_FIELDS` (runtime fields null)."""
    rows = []
    for c in cases:
        rows.append(
            {
                "uuid": case_uuid(c.op, c.args),
                "op_name": f"aten.{c.op}",
                "args": c.args,
                "runnable": bool(c.params.get("runnable", c.included)),
                "included_in_benchmark": bool(c.included),
                "why_excluded": [] if c.why_excluded is None else [c.why_excluded],
                "is_synthetic": bool(c.is_synthetic),
                "runtime_ms": None,
                "relative_runtime_to_kernel_launch": None,
                "is_overhead_dominated_op": None,
                "count": int(c.count),
                "in_models": list(c.models),
                "in_models_count": len(c.models),
            }
        )
    return rows


def write_dataset(rows: list[dict[str, Any]], path: str | Path) -> Path:
    """Write rows as ``.parquet`` (needs pyarrow) or ``.json``; the file is replaced atomically."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".parquet", ".json"):
        raise ValueError(f"output must end in .parquet or .json, not {path.name!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=suffix + ".tmp")
    os.close(fd)
    try:
        if suffix == ".json":
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(rows, f, indent=1)
                f.write("\n")
        else:
            _write_parquet(rows, tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def _write_parquet(rows: list[dict[str, Any]], path: str) -> None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ImportError("writing parquet needs pyarrow: pip install 'opbench[parquet]'") from None
    # one column a line, in the order of BackendBench's dataset (same-shape lines)
    schema = pa.schema(
        [
            ("uuid", pa.string()),
            ("op_name", pa.string()),
            ("args", pa.string()),
            ("runnable", pa.bool_()),
            ("included_in_benchmark", pa.bool_()),
            ("why_excluded", pa.list_(pa.string())),
            ("is_synthetic", pa.bool_()),
            ("runtime_ms", pa.float64()),
            ("relative_runtime_to_kernel_launch", pa.float64()),
            ("is_overhead_dominated_op", pa.bool_()),
            ("count", pa.int64()),
            ("in_models", pa.list_(pa.string())),
            ("in_models_count", pa.int64()),
        ]
    )
    assert tuple(schema.names) == DATASET_FIELDS
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)


def dataset_summary(cases: list[Case]) -> dict[str, Any]:
    """Counts for the summary table: ops, rows, included, and exclusion reasons."""
    reasons: Counter[str] = Counter()
    for c in cases:
        if not c.included and c.why_excluded:
            reasons[_reason_class(c.why_excluded)] += 1
    return {
        "ops": len({c.op for c in cases}),
        "ops_included": len({c.op for c in cases if c.included}),
        "rows": len(cases),
        "included": sum(c.included for c in cases),
        "runnable": sum(bool(c.params.get("runnable", c.included)) for c in cases),
        "reasons": reasons.most_common(),
    }


def _reason_class(reason: str) -> str:
    """Group reasons that embed details (shapes, names) under their stable prefix."""
    if reason.startswith("dry run:"):
        return reason[:80]
    if reason.startswith("overload "):
        return "overload does not exist in this torch"
    return reason
