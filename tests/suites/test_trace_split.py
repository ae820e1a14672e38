"""The tuning/held-out split of the traces (suites/trace_split.py): the committed file is
what the written-down rule gives on the traces, every folder is halved, and no held-out
row is one a tuning model uses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from opbench.suites.trace_split import SPLIT_FILE, half_of, load_split, make_split, select
from opbench.suites.traces import TraceEntry, load_traces

TRACES = Path(__file__).resolve().parents[3] / "shared" / "traces"
needs_traces = pytest.mark.skipif(not TRACES.is_dir(), reason="needs ../shared/traces")


@needs_traces
def test_the_committed_split_is_the_rules_output() -> None:
    assert json.loads(SPLIT_FILE.read_text()) == make_split(TRACES)


def test_every_folder_is_halved_and_the_halves_are_disjoint() -> None:
    data = json.loads(SPLIT_FILE.read_text())
    assert set(data["tuning"]) == set(data["heldout"])
    for folder in data["tuning"]:
        t, h = set(data["tuning"][folder]), set(data["heldout"][folder])
        assert not t & h
        assert abs(len(t) - len(h)) <= 3, folder
    names = {m for half in ("tuning", "heldout") for v in data[half].values() for m in v}
    assert len(load_split()) == len(names)
    tuned = {m for v in data["tuning"].values() for m in v}
    assert not tuned & {m for v in data["heldout"].values() for m in v}


def _entry(op: str, args: str, model: str) -> TraceEntry:
    return TraceEntry(op=op, args=args, count=1, model=model, file=f"{model}.txt", line=1)


def test_a_row_any_tuning_model_uses_is_never_held_out() -> None:
    split = load_split()
    tuning = next(m for m, h in split.items() if h == "tuning")
    heldout = [m for m, h in split.items() if h == "heldout"][:2]
    shared = "((T([4, 4], f16),), {})"
    own = "((T([8, 8], f16),), {})"
    entries = [
        _entry("relu.default", shared, tuning),
        _entry("relu.default", shared, heldout[0]),
        _entry("relu.default", own, heldout[1]),
        _entry("relu.default", own, "SomeoneElsesModel_training"),
    ]
    assert [(e.args, e.model) for e in select(entries, "heldout")] == [(own, heldout[1])]
    assert [(e.args, e.model) for e in select(entries, "tuning")] == [(shared, tuning)]
    assert half_of("SomeoneElsesModel_training") is None
    with pytest.raises(ValueError, match="unknown trace split"):
        select(entries, "test")


@needs_traces
def test_on_the_real_traces_the_halves_share_no_row() -> None:
    entries = load_traces(TRACES)
    rows = lambda es: {(e.op, e.args) for e in es}  # noqa: E731
    tuning, heldout = rows(select(entries, "tuning")), rows(select(entries, "heldout"))
    assert tuning and heldout and not tuning & heldout
    assert any(op.startswith("convolution") for op, _ in heldout)


@needs_traces
def test_the_traces_suite_builds_one_half() -> None:
    from opbench.suites.traces import build_trace_cases

    heldout = build_trace_cases(TRACES, ops={"relu.default"}, split="heldout", use_cache=False)
    tuning = build_trace_cases(TRACES, ops={"relu.default"}, split="tuning", use_cache=False)
    every = build_trace_cases(TRACES, ops={"relu.default"}, use_cache=False)
    h, t = {c.args for c in heldout}, {c.args for c in tuning}
    assert h and t and not h & t
    assert h | t <= {c.args for c in every}
