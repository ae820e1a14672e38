"""``benchmarks/tune/matmul_twins.py``: a candidate kind against its twin on the same
configuration, grouped by tile and split, and how often it beat every other candidate."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks" / "tune"))

import matmul_twins as twins  # noqa: E402


def _name(kind: str, cfg: list[int]) -> str:
    return f"{kind}:{json.dumps(cfg)}"


SPLIT2 = [128, 128, 64, 8, 4, 4, 2]
UNSPLIT = [64, 128, 64, 8, 4, 4]


def _row(times: dict[str, float]) -> dict:
    return {"times": {"eager": 1.0, "served:": 0.1, **times}}


def test_twin_ratios_pair_the_same_configuration_and_skip_failures() -> None:
    rows = [
        _row(
            {
                _name("new", SPLIT2): 2.0,
                _name("old", SPLIT2): 1.0,
                _name("new", UNSPLIT): 1.0,
                _name("old", UNSPLIT): 3.0,
            }
        ),  # fmt: skip
        _row({_name("new", SPLIT2): math.inf, _name("old", SPLIT2): 1.0}),  # failed: left out
        _row({_name("new", SPLIT2): 1.0}),  # no twin timed
    ]
    got = twins.twin_ratios(rows, "new", "old")
    assert got == {(128, 128, 2): [0.5], (64, 128, 1): [3.0]}
    assert twins.twin_ratios(rows, "old", "new") == {(128, 128, 2): [2.0], (64, 128, 1): [1 / 3]}


def test_best_other_counts_wins_over_every_other_candidate_not_the_served_path() -> None:
    rows = [
        _row({_name("new", SPLIT2): 0.5, _name("old", UNSPLIT): 1.0}),  # a win
        _row({_name("new", SPLIT2): 0.5, _name("tma", UNSPLIT): 0.4}),  # beaten by tma
        _row({_name("old", UNSPLIT): 1.0}),  # new not timed
    ]
    # served: 0.1 would beat every candidate: it is what runs, not a candidate
    assert twins.best_other(rows, "new") == (2, 1)


def test_main_prints_the_table_and_fails_without_twins(tmp_path, capsys, monkeypatch) -> None:
    base = {"half": "tuning", "op": "mm.default", "args": "(1)"}
    sweep = tmp_path / "a.jsonl"
    sweep.write_text(json.dumps({**base, **_row({_name("new", SPLIT2): 2.0,
                                                 _name("old", SPLIT2): 1.0})}) + "\n")  # fmt: skip
    monkeypatch.setattr(
        sys, "argv", ["matmul_twins.py", str(sweep), "--kind", "new", "--twin", "old"]
    )
    assert twins.main() == 0
    out = capsys.readouterr().out
    assert "fastest of all candidates on 0 of 1 products" in out
    assert "| 128x128 | 2 | 1 | 0.500 | 0.500 | 0.500 |" in out
    monkeypatch.setattr(
        sys, "argv", ["matmul_twins.py", str(sweep), "--kind", "new", "--twin", "absent"]
    )
    assert twins.main() == 1
    with pytest.raises(SystemExit):
        monkeypatch.setattr(sys, "argv", ["matmul_twins.py", str(sweep)])
        twins.main()
