"""``benchmarks/probes/transpose_tiles.py --report``: each tile against the baseline on
each half, and the pick per channel class from the tuning half alone."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks" / "probes"))

import transpose_tiles as tt  # noqa: E402


def _row(shape: tuple[int, ...], times: dict[str, float | None], torch_us: float) -> dict:
    base = {tt._name(t): 10.0 for t in tt.TILES}
    return {"shape": list(shape), "torch_us": torch_us, "tiles": {**base, **times}}


def test_report_picks_on_the_tuning_half_alone() -> None:
    few, many, held = (128, 72, 14, 14), (32, 2048, 14, 14), (64, 256, 14, 14)
    assert tt.SHAPES[few] == tt.SHAPES[many] == "tuning" and tt.SHAPES[held] == "heldout"
    rows = [
        _row(few, {"128x32/4w": 5.0, "64x16/2w": 8.0}, 4.0),
        _row(many, {"128x32/4w": 20.0, "64x16/2w": 9.0, "32x64/4w": None}, 30.0),
        # held out: a tile fastest here must not be picked
        _row(held, {"16x64/2w": 1.0}, 10.0),
    ]
    lines = tt.report({"rows": rows, "gpu": "G", "torch": "T", "command": "C"})
    picks = lines[-1]
    assert "<= 128 channels: 128x32/4w (0.500)" in picks
    assert "> 128 channels: 64x16/2w (0.900)" in picks
    assert "16x64/2w" not in picks
    table = {line.split(" | ")[0].strip("| "): line.split(" | ")[1:] for line in lines
             if line.startswith("| ") and not line.startswith("| tile")}  # fmt: skip
    # 64x16/2w: tuning all (0.8 x 0.9) ** 0.5; held out 1.0
    assert float(table["64x16/2w"][0]) == pytest.approx((0.8 * 0.9) ** 0.5, abs=1e-3)
    assert table["16x64/2w"][3] == "0.100"
    assert table["32x64/4w"][2] == "-"  # its only >128-channel tuning row failed its check
    assert table["torch"][1] == "0.400"  # PyTorch's copy against the baseline
