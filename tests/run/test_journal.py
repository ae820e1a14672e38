"""The JSON-lines journals long jobs resume from: records keyed, later lines winning, and
a malformed line named by file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from opbench.run.journal import append_record, read_records


def test_records_round_trip_keyed_with_later_lines_winning(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    assert read_records(path, "test", lambda r: r["id"]) == {}
    append_record(path, {"id": "a", "ms": 1.0})
    append_record(path, {"id": "b", "ms": 2.0})
    append_record(path, {"id": "a", "ms": 3.0})
    got = read_records(path, "test", lambda r: r["id"], required=("ms",))
    assert got == {"a": {"id": "a", "ms": 3.0}, "b": {"id": "b", "ms": 2.0}}


@pytest.mark.parametrize(
    "bad",
    ['{"id": "c"', '{"ms": 1.0}', '{"id": "c"}', "[1, 2]"],
    ids=["json", "key", "required", "list"],
)
def test_a_malformed_line_is_named_by_file_and_line(tmp_path: Path, bad: str) -> None:
    path = tmp_path / "j.jsonl"
    path.write_text('{"id": "a", "ms": 1.0}\n\n' + bad + "\n")
    with pytest.raises(ValueError, match=r"j\.jsonl:3: not a test line"):
        read_records(path, "test", lambda r: r["id"], required=("ms",))
