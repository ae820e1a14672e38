"""``--shard K/N``: the parts of a run's tests are disjoint, together the whole run (after
``--limit-per-op``), the same on every machine, and bad input is refused with a clear
error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from opbench.run.session import RunError, RunRequest, run, select_cases
from opbench.run.shards import in_shard, parse_shard
from opbench.suites.case import Case

ROOT = Path(__file__).resolve().parents[2]


def _cases() -> list[Case]:
    return [Case(op=op, args=f"((T([{n}], f32),), {{}})", count=100 - n)
            for op in ("relu.default", "neg.default", "abs.default") for n in range(1, 21)]  # fmt: skip


@pytest.mark.parametrize("n", [1, 2, 3, 7])
def test_the_parts_are_disjoint_and_together_the_whole_selection(n: int):
    cases = _cases()
    whole = select_cases(RunRequest(suite="traces", limit_per_op=15), cases).cases
    parts = [select_cases(RunRequest(suite="traces", limit_per_op=15, shard=f"{k}/{n}"), cases)
             for k in range(1, n + 1)]  # fmt: skip
    ids = [c.test_id for p in parts for c in p.cases]
    assert len(ids) == len(set(ids))  # disjoint
    assert sorted(ids) == sorted(c.test_id for c in whole)  # the limit applied before the split
    if n > 1:
        assert all(len(p.cases) < len(whole) for p in parts)
        # an op whose tests all fall in other parts is not "not tested"
        assert all(not p.not_tested for p in parts)


def test_a_test_falls_in_the_same_part_in_every_process():
    """Python's ``hash`` of a string is salted per process; the split must not be."""
    ids = [c.test_id for c in _cases()]
    code = (
        "import json, sys; from opbench.run.shards import in_shard; "
        "print(json.dumps([k for t in json.load(sys.stdin) for k in (1, 2, 3) "
        "if in_shard(t, k, 3)]))"
    )
    got = subprocess.run([sys.executable, "-c", code], input=json.dumps(ids), text=True,
                         capture_output=True, check=True, env={"PYTHONHASHSEED": "123"})  # fmt: skip
    here = [k for t in ids for k in (1, 2, 3) if in_shard(t, k, 3)]
    assert json.loads(got.stdout) == here


@pytest.mark.parametrize("text", ["", "2", "0/3", "4/3", "1/0", "a/b", "1/2/3", "-1/2"])
def test_a_malformed_shard_is_refused(text: str, tmp_path):
    with pytest.raises(ValueError, match="--shard"):
        parse_shard(text)
    with pytest.raises(RunError, match="--shard"):
        run(RunRequest(suite="smoke", shard=text, out=tmp_path / "r"))


def test_parse_shard_reads_spaces():
    assert parse_shard(" 2 / 5 ") == (2, 5)


def test_two_parts_of_a_cli_run_judge_what_the_whole_run_judges(tmp_path):
    """End to end on the CPU: ``opbench run --shard 1/2`` and ``2/2`` record every test
    of the unsharded run once, and each run directory names its part."""

    def ids(out: Path, shard: str | None) -> list[str]:
        cmd = [sys.executable, "-m", "opbench.cli", "run", "--suite", "smoke", "--backend",
               "aten", "--device", "cpu", "--ops", "relu,add,neg,abs", "--no-perf",
               "--out", str(out), "--quiet"]  # fmt: skip
        if shard:
            cmd += ["--shard", shard]
        subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT, timeout=600)
        summary = json.loads((out / "summary.json").read_text())
        assert summary["options"]["shard"] == shard
        import sqlite3

        con = sqlite3.connect(out / "results.sqlite")
        return [r[0] for r in con.execute("select test_id from results")]

    whole = ids(tmp_path / "whole", None)
    one, two = ids(tmp_path / "one", "1/2"), ids(tmp_path / "two", "2/2")
    assert one and two and not set(one) & set(two)
    assert sorted(one + two) == sorted(whole)
