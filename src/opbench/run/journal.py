"""Append-only JSON-lines journals: how a long job (tuning, baselines, the compile
baseline) that a device call's time limit cuts off resumes without losing what it
finished. One record per finished unit, appended as soon as it is done; reading keys the
records and names the file and line of any that is malformed."""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

__all__ = ["append_record", "read_records"]


def append_record(path: Path, record: dict[str, Any]) -> None:
    """Append one record (a line is whole or absent: a job killed mid-write loses only it)."""
    with path.open("a") as f:
        f.write(json.dumps(record) + "\n")


def read_records(
    path: Path,
    what: str,
    key: Callable[[dict[str, Any]], Hashable],
    required: tuple[str, ...] = (),
) -> dict[Hashable, dict[str, Any]]:
    """The records of ``path`` (none when it does not exist) by ``key(record)``, a later
    line replacing an earlier one with the same key. A line that is not JSON, or lacks a
    field ``key`` reads or one named in ``required``, raises
    ``ValueError("PATH:LINE: not a WHAT line (...)")``."""
    records: dict[Hashable, dict[str, Any]] = {}
    if not path.exists():
        return records
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            for field in required:
                rec[field]  # noqa: B018 - a missing field is this line's error
            records[key(rec)] = rec
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{path}:{n}: not a {what} line ({type(e).__name__}: {e})") from None
    return records
