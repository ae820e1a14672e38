"""``RUN_DIR/tests.parquet``: one typed row per stored test."""

import subprocess
import sys
from pathlib import Path

import pytest

from opbench.run.store import ResultStore


@pytest.mark.slow
def test_tests_parquet_matches_the_store(tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    out = tmp_path / "run"
    r = subprocess.run(
        [
            sys.executable, "-m", "opbench.cli", "run", "--suite", "smoke", "--backend",
            "aten", "--device", "cpu", "--ops", "relu,add", "--out", str(out), "--quiet",
        ],
        capture_output=True, text=True,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    table = pq.read_table(out / "tests.parquet").to_pylist()
    store = ResultStore(out / "results.sqlite")
    stored = {t.test_id: t for t in store.results()}
    store.close()
    assert {row["test_id"] for row in table} == set(stored)
    for row in table:
        t = stored[row["test_id"]]
        assert row["status"] == t.status and row["speedup"] == t.speedup
        assert f", {row['dtype']})" in t.args and isinstance(row["weak"], bool)
