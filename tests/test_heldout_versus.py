"""``benchmarks/reproduce/heldout_versus.py``: two held-out summaries of the same rows,
op by op: the ops both pass compared, the others listed with the first failure, the
second backend's leads named with the command that judges them again in turns."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "reproduce" / "heldout_versus.py"
sys.path.insert(0, str(SCRIPT.parent))

import heldout_versus as hv  # noqa: E402


def _summary(command: str, per_op: dict[str, tuple[float, float]], failed: dict[str, str]) -> dict:
    """What heldout_report.py writes, as much as the comparison reads."""
    return {
        "command": command,
        "tests": 6,
        "per_op": {op: {"tests": 2, "device": d, "host": h} for op, (d, h) in per_op.items()},
        "not_passed": [{"op": op, "category": "wrong", "message": m} for op, m in failed.items()],
    }


OURS = _summary("ours", {"relu.default": (1.2, 1.1), "mm.default": (0.95, 1.4)}, {})
THEIRS = _summary(
    "theirs",
    {"relu.default": (1.0, 0.3), "mm.default": (0.97, 0.4), "cat.default": (1.0, 0.2)},
    {"cat.default": "calls aten.clone"},
)


def test_ops_both_pass_are_compared_and_the_others_listed() -> None:
    r = hv.compare(OURS, THEIRS)
    assert r["ops_both_pass"] == 2
    by_op = {x["op"]: x for x in r["both"]}
    assert by_op["mm.default"]["theirs_ahead"] == ["device"]
    assert by_op["relu.default"]["theirs_ahead"] == []
    assert r["device_geomean"][0] == pytest.approx((1.2 * 0.95) ** 0.5)
    assert r["not_both"] == [
        {"op": "cat.default", "ours": "passed", "theirs": "wrong: calls aten.clone"}
    ]


def test_runs_of_other_rows_are_refused() -> None:
    with pytest.raises(SystemExit, match="not the same rows"):
        hv.compare(OURS, {**THEIRS, "tests": 5})


def test_a_lead_comes_with_the_command_that_judges_it_again(tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(OURS))
    b.write_text(json.dumps(THEIRS))
    out = tmp_path / "v"
    subprocess.run([sys.executable, str(SCRIPT), str(a), str(b), "--names", "triton,flag_gems",
                    "--out", str(out)], check=True, capture_output=True)  # fmt: skip
    text = out.with_suffix(".md").read_text()
    assert "flag_gems is ahead on `mm.default` (device)." in text
    assert "`OPS=mm.default bash benchmarks/gpu/alternate_run.sh`" in text
    assert "| mm.default **flag_gems ahead** | 2 | 0.950 | 0.970 | 1.400 | 0.400 |" in text
    no_lead = hv.markdown({"names": ["a", "b"], **hv.compare(OURS, OURS)}, OURS, OURS)
    assert "b is ahead on no op." in no_lead and "alternate_run.sh" not in no_lead
