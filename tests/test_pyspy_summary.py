"""``benchmarks/probes/pyspy_summary.py`` on raw py-spy records written the way py-spy
writes them: a process started with a multi-line ``python -c`` program (Triton's driver
probe) has newlines and ``;`` in its name, and its records span several lines."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks" / "probes"))
import pyspy_summary  # noqa: E402

HARNESS = 'process 10:"python3 -m opbench.cli run --suite traces"'
PROBE = 'process 11:"python3 -c from triton.runtime import driver; import os\nprint(driver)"'
RAW = (
    f"{HARNESS};thread (0x1): MainThread;main (cli.py:3);plan (plan.py:9) 50\n"
    f"{HARNESS};{PROBE};thread (0x2): MainThread;<module> (<string>:1);probe (d.py:2) 25\n"
    f"{HARNESS};thread (0x1): MainThread;main (cli.py:3) 25\n"
)


def test_multi_line_process_names_are_one_record(tmp_path: Path) -> None:
    raw = tmp_path / "prof.raw"
    raw.write_text(RAW)
    got = pyspy_summary.summarize(str(raw), rate=25.0, functions=None)
    assert got["active_s_total"] == pytest.approx(4.0)  # 100 samples at 25 a second
    assert got["active_s_by_process_kind"] == {"harness": 3.0, "python -c": 1.0}
    assert got["active_s_in"]["main"] == pytest.approx(3.0)
    assert got["active_s_in"]["probe"] == pytest.approx(1.0)


def test_a_line_that_is_no_record_names_its_line(tmp_path: Path) -> None:
    raw = tmp_path / "prof.raw"
    raw.write_text(RAW + "not a record\n")
    with pytest.raises(SystemExit, match=r"prof.raw:5: not a py-spy raw line"):
        pyspy_summary.summarize(str(raw), rate=25.0, functions=None)
