"""Per-test exports for analysis: ``RUN_DIR/tests.parquet`` beside ``ops.csv`` (one row
per test, typed columns), written when pyarrow is installed (``opbench[parquet]``).

Read it with pandas or polars (``pd.read_parquet("runs/x/tests.parquet")``) to slice a
run by dtype, shape or failure category, or to join two runs on ``test_id``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from opbench.report.html import dtype_of
from opbench.report.metrics import sol_fraction
from opbench.run.store import TestResult

__all__ = ["COLUMNS", "test_rows", "write_tests_parquet"]

#: Column -> pyarrow type name, in file order.
COLUMNS: dict[str, str] = {
    "test_id": "string",
    "op": "string",
    "dtype": "string",
    "status": "string",
    "category": "string",
    "weak": "bool_",
    "args": "string",
    "message": "string",
    "max_abs_err": "float64",
    "max_rel_err": "float64",
    "ref_device_ms": "float64",
    "cand_device_ms": "float64",
    "ref_host_ms": "float64",
    "cand_host_ms": "float64",
    "speedup": "float64",
    "speedup_host": "float64",
    "spread": "float64",
    "sol_fraction": "float64",
    "flags": "string",
    "backend": "string",
    "device": "string",
    "worker": "string",
    "duration_s": "float64",
}


def test_rows(results: Iterable[TestResult]) -> list[dict[str, Any]]:
    rows = []
    for r in results:
        row = {k: getattr(r, k, None) for k in COLUMNS}
        row["dtype"] = dtype_of(r.args)
        row["sol_fraction"] = sol_fraction(r)
        row["flags"] = ",".join(r.flags or [])
        row["weak"] = bool(r.weak)
        rows.append(row)
    return rows


def write_tests_parquet(path: Path, results: Iterable[TestResult]) -> bool:
    """Write the tests as parquet; False (nothing written) without pyarrow."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return False
    rows = test_rows(results)
    schema = pa.schema([(k, getattr(pa, t)()) for k, t in COLUMNS.items()])
    table = pa.Table.from_pylist(rows, schema=schema)
    tmp = path.with_suffix(".parquet.tmp")
    pq.write_table(table, tmp)
    tmp.replace(path)
    return True
