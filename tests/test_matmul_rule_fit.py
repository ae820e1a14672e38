"""The matmul rule's fitter (``benchmarks/tune/matmul_rule.py``): regrets keep the best
``top`` candidates, capped; ``--search`` scores each variant of the rule by leave-one-out
over the tuning half alone and reports its best k, so a variant that ranks better scores
higher."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks" / "tune"))

import matmul_rule as fitter  # noqa: E402

TMA = f"tma:{json.dumps([128, 128, 64, 8, 4, 4])}"
PTR = f"ptr:{json.dumps([128, 128, 64, 8, 4, 4])}"
SLOW = f"ptr:{json.dumps([64, 64, 64, 8, 4, 4])}"


def _row(M: int, times: dict[str, float], half: str = "tuning") -> dict:
    return {"half": half, "op": "mm.default", "args": f"({M})", "layout": "rr", "batch": 1,
            "M": M, "N": 1024, "K": 1024, "times": {"eager": 1.0, "served:": 1.0, **times}}  # fmt: skip


def test_regrets_keep_the_best_few_capped() -> None:
    row = _row(1024, {TMA: 0.5, PTR: 0.6, SLOW: 5.0})
    assert fitter.regrets(row, cap=0.3, top=2) == {
        "tma:128x128x64/4w4s": 0.0, "ptr:128x128x64/4w4s": pytest.approx(math.log(1.2))}  # fmt: skip
    assert fitter.regrets(row, cap=0.3, top=9)["ptr:64x64x64/4w4s"] == 0.3


def test_search_scores_variants_by_leave_one_out_over_the_tuning_half(monkeypatch) -> None:
    # aligned products run faster on TMA; those with M not a multiple of 8 on the pointer
    # kernel, and each one's nearest in log2 M is of the other kind
    tune = [_row(m, {TMA: 0.5, PTR: 1.0}) for m in (1024, 2048, 4096)]
    tune += [_row(m, {TMA: 2.0, PTR: 0.5}) for m in (1020, 2044, 4092)]
    monkeypatch.setattr(fitter, "KS", (1, 2))
    monkeypatch.setattr(fitter, "SEARCH", {"aligned first": {}, "not": {"align": False}})
    found = fitter.search(tune)
    assert found["aligned first"]["leave_one_out"] > found["not"]["leave_one_out"]
    for v in found.values():
        assert set(v["by_k"]) == {1, 2} and v["leave_one_out"] == v["by_k"][v["k"]]
    assert found["aligned first"]["leave_one_out"] == pytest.approx(2.0)  # every pick the best
    with pytest.raises(ValueError, match="tuning half only"):
        fitter.search([*tune, _row(3000, {TMA: 0.5, PTR: 1.0}, half="heldout")])


def test_products_under_the_domain_are_neighbours_never_scores() -> None:
    """A product under ``MIN_FLOP`` (the bucket tables serve it) is a point the others
    are ranked by, and is never scored itself: its own time cannot move the score."""
    big = [_row(m, {TMA: 0.5, PTR: 1.0}) for m in (1024, 2048)]
    small = {**_row(8, {TMA: 2.0, PTR: 0.5}), "N": 64, "K": 64}  # 8x64x64: 65 KFLOP
    assert not fitter.in_domain(small) and all(fitter.in_domain(r) for r in big)
    worse = {**small, "times": {**small["times"], "eager": 1e-9}}  # would sink a geomean
    assert fitter.leave_one_out([*big, small], 1) == fitter.leave_one_out([*big, worse], 1)
    assert fitter.leave_one_out([*big, small], 1) == pytest.approx(2.0)
