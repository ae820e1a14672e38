"""The results store: one SQLite file per run directory, written after every test.

WAL mode and one transaction per result mean that killing the run at any moment
(even ``kill -9``) loses at most the tests in flight, and ``--resume`` can skip
everything already recorded. Only the harness process writes here; workers never
see the path (the sandbox hides the run directory from them).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1

_RESULT_COLUMNS: dict[str, str] = {
    "test_id": "TEXT PRIMARY KEY",
    "op": "TEXT NOT NULL",
    "args": "TEXT",
    "seed": "INTEGER",
    "suite": "TEXT",
    "status": "TEXT NOT NULL",
    "category": "TEXT",
    "message": "TEXT",
    "weak": "INTEGER DEFAULT 0",
    "max_abs_err": "REAL",
    "max_rel_err": "REAL",
    "ref_device_ms": "REAL",
    "cand_device_ms": "REAL",
    "ref_host_ms": "REAL",
    "cand_host_ms": "REAL",
    "speedup": "REAL",
    "speedup_host": "REAL",
    "spread": "REAL",
    "flags": "TEXT",
    "details": "TEXT",
    "timing": "TEXT",
    "case_json": "TEXT",
    "backend": "TEXT",
    "device": "TEXT",
    "worker": "TEXT",
    "duration_s": "REAL",
    "finished_at": "REAL",
}


class StoreError(RuntimeError):
    """The run directory cannot be used as asked (e.g. resuming a different run)."""


def case_fields(case: Any, *, backend: str, device: str, worker: str = "") -> dict[str, Any]:
    """The fields of a :class:`TestResult` that describe the test itself (its case, the
    backend and device it ran for), shared by every way a result is made."""
    return dict(
        test_id=case.test_id,
        op=case.op,
        args=case.args,
        seed=case.seed,
        suite=case.suite,
        case_json=case.to_dict(),
        backend=backend,
        device=device,
        worker=worker,
    )


# Fields shaped like instrument/records.CandidateReport's and models/check.ModelCheck's,
# kept apart: the stored row of one test, which neither of those is.
@dataclass
class TestResult:
    """One finished test, as stored. Times in milliseconds; speedups are ref/candidate."""

    __test__ = False  # not a pytest test class

    test_id: str
    op: str
    status: str  # passed | failed | not_implemented | skipped | not_run | judge_error
    category: str | None = None
    message: str = ""
    args: str = ""
    seed: int = 0
    suite: str = ""
    weak: bool = False
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    ref_device_ms: float | None = None
    cand_device_ms: float | None = None
    ref_host_ms: float | None = None
    cand_host_ms: float | None = None
    speedup: float | None = None
    speedup_host: float | None = None
    spread: float | None = None
    flags: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    timing: dict[str, Any] | None = None
    case_json: dict[str, Any] | None = None
    backend: str = ""
    device: str = ""
    worker: str = ""
    duration_s: float | None = None
    finished_at: float | None = None

    def row(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["weak"] = int(bool(self.weak))
        for key in ("flags", "details", "timing", "case_json"):
            d[key] = json.dumps(d[key], default=str) if d[key] is not None else None
        d["finished_at"] = self.finished_at or time.time()
        return d

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> TestResult:
        d = dict(row)
        d["weak"] = bool(d["weak"])
        for key in ("flags", "details", "timing", "case_json"):
            d[key] = json.loads(d[key]) if d[key] else ({} if key == "details" else None)
        if d["flags"] is None:
            d["flags"] = []
        return cls(**d)


class ResultStore:
    """Append-only results of one run; safe to use from several harness threads."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        cols = ", ".join(f"{k} {v}" for k, v in _RESULT_COLUMNS.items())
        with self._lock:
            self._db.execute(f"CREATE TABLE IF NOT EXISTS results ({cols})")
            self._db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
            self._db.execute("CREATE INDEX IF NOT EXISTS results_op ON results(op)")

    # ---- run metadata -------------------------------------------------------------
    def get_meta(self, key: str) -> Any:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def set_meta(self, key: str, value: Any) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                (key, json.dumps(value, default=str)),
            )

    def check_same_run(self, identity: dict[str, Any]) -> None:
        """Refuse to resume a run directory that was made for a different run."""
        stored = self.get_meta("identity")
        if stored is None:
            self.set_meta("identity", identity)
            return
        diffs = [k for k in sorted(set(stored) | set(identity)) if stored.get(k) != identity.get(k)]
        if diffs:
            detail = "; ".join(
                f"{k}: was {stored.get(k)!r}, now {identity.get(k)!r}" for k in diffs
            )
            raise StoreError(
                f"{self.path.parent} holds a different run ({detail}). "
                "Use a new --out directory, or repeat the original command to resume it."
            )

    # ---- results ----------------------------------------------------------------
    def add(self, result: TestResult) -> None:
        """Record one result in its own transaction (durable before returning)."""
        row = result.row()
        names = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute(
                    f"INSERT OR REPLACE INTO results ({names}) VALUES ({marks})",
                    tuple(row.values()),
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def finished_ids(self) -> set[str]:
        return {r[0] for r in self._db.execute("SELECT test_id FROM results")}

    def remove(self, test_ids: set[str]) -> None:
        with self._lock:
            self._db.executemany("DELETE FROM results WHERE test_id = ?", [(t,) for t in test_ids])

    def results(self) -> Iterator[TestResult]:
        for row in self._db.execute("SELECT * FROM results ORDER BY op, test_id"):
            yield TestResult.from_row(row)

    def get(self, test_id: str) -> TestResult | None:
        row = self._db.execute("SELECT * FROM results WHERE test_id = ?", (test_id,)).fetchone()
        return TestResult.from_row(row) if row else None

    def close(self) -> None:
        with self._lock:
            self._db.close()
