"""``benchmarks/tune/pointwise_tiles.py`` without a GPU: the rows of each half of the
traces alone (small elementwise results only), each setting's result checked against
eager under the interpreter, and the pick made on the tuning half whatever the held-out
half says."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")

REPO = Path(__file__).resolve().parents[2]
SPLIT = json.loads((REPO / "src" / "opbench" / "suites" / "trace_split.json").read_text())
sys.path.insert(0, str(REPO / "benchmarks" / "tune"))

import pointwise_tiles as pt  # noqa: E402


def _traces(tmp_path: Path) -> Path:
    """One tuning and one held-out model of one folder: relu on small shapes of each
    model's own, and one result too large for the small tiles."""
    folder = tmp_path / "traces" / "hf_train"
    folder.mkdir(parents=True)
    tuning, heldout = SPLIT["tuning"]["hf_train"][0], SPLIT["heldout"]["hf_train"][0]
    big = f"[{_past_small_tiles()}]"
    for model, shapes in ((tuning, ["[3, 5]", big]), (heldout, ["[7, 11]"])):
        lines = ["Operator: aten.relu.default"]
        lines += [f"cnt: {9 - i}, ((T({s}, f32),), {{}})" for i, s in enumerate(shapes)]
        (folder / f"{model}.txt").write_text("\n".join(lines) + "\n")
    return tmp_path / "traces"


def _past_small_tiles() -> int:
    """An element count the small tiles do not serve (whole BLOCK programs there)."""
    from opbench.kernels._lib import pointwise as pw

    return pw.SPREAD * pw.BLOCK + 1


def test_rows_of_each_half_timed_per_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import host_profile

    from opbench.kernels._lib import pointwise as pw

    monkeypatch.setattr(pt, "DEVICE", "cpu")
    monkeypatch.setattr(host_profile, "DEVICE", "cpu")
    monkeypatch.setattr(pt, "SETTINGS", [(128, 1), (512, 4)])
    traces = str(_traces(tmp_path))
    tuning, heldout = pt.rows(traces, "tuning", 5), pt.rows(traces, "heldout", 5)
    assert [(r["op"], r["n"]) for r in tuning] == [("relu.default", 15)]  # the big one left out
    assert [(r["op"], r["n"]) for r in heldout] == [("relu.default", 77)]
    before = (pw.MIN_BLOCK, pw.SMALL_EPT)
    speedups = pt.time_row(tuning[0], rounds=1)
    assert set(speedups) == {"128x1", "512x4"} and all(v > 0 for v in speedups.values())
    assert (pw.MIN_BLOCK, pw.SMALL_EPT) == (128, 1) == before  # the shipped setting restored


def test_the_pick_is_the_tuning_halfs_best_never_the_held_out_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pt, "SETTINGS", [(128, 1), (256, 2)])
    timed = {
        "tuning": [{"speedup": {"128x1": 1.0, "256x2": 1.2}}],
        "heldout": [
            {"speedup": {"128x1": 1.5, "256x2": 0.9}},
            {"speedup": {"128x1": 1.0, "256x2": 0.0}},  # 256x2 wrong or failed here
        ],
    }
    s = pt.summarise(timed)
    assert s["pick"] == "256x2" and s["shipped"] == "128x1"
    # a row where a setting failed is left out of every setting's geomean
    assert s["geomean"]["heldout"]["rows"] == 1
    assert s["geomean"]["heldout"]["128x1"] == pytest.approx(1.5)
    assert s["geomean"]["tuning"]["256x2"] == pytest.approx(1.2)
