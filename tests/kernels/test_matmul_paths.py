"""``benchmarks/tune/matmul_paths.py``'s ``--variant``: the served path timed again under
module settings, those settings in force only around it (the matmul's plans dropped on
the way in and out), and the summary of each variant against the served path."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "tune"))

import matmul_paths as paths  # noqa: E402

from opbench.kernels._lib import matmul  # noqa: E402


@pytest.fixture
def whole_off(monkeypatch):
    """One variant, the split rule before whole waves; the module's table restored after."""
    monkeypatch.setattr(paths, "VARIANTS", {"rounded_up": ["matmul.SPLIT_WHOLE_WAVES=False"]})
    monkeypatch.setattr(matmul, "SPLIT_WHOLE_WAVES", True)


def test_a_variant_is_timed_under_its_settings_and_only_there(whole_off, monkeypatch) -> None:
    """The served path and the variant each run once per (stand-in) timing, the variant
    with the setting off and its plan made under it; after it the setting and the plans
    are as before, and both results were checked against eager (a time, not ``inf``)."""
    seen: list[bool] = []
    real = matmul.matmul_ruled_into

    def spy(*args, **kwargs):
        seen.append(matmul.SPLIT_WHOLE_WAVES)
        return real(*args, **kwargs)

    monkeypatch.setattr(matmul, "matmul_ruled_into", spy)
    row = {"half": "tuning", "op": "mm.default", "batch": 1, "M": 40, "N": 33, "K": 24,
           "args": "((T([40, 24], f16), T([24, 33], f16)), {})"}  # fmt: skip
    res = paths.time_product(row, "cpu", lambda fn: (fn(), 1.0)[1], served_only=True)
    assert res["times"]["served:"] == 1.0 and res["times"]["served@rounded_up:"] == 1.0, res
    assert not res["errors"], res["errors"]
    # served: checked once, timed once; the variant the same, with the setting off
    assert seen == [True, True, False, False], seen
    assert matmul.SPLIT_WHOLE_WAVES is True
    assert all(key[-1] is True for key in matmul._MM_PLANS), "a variant's plan outlived it"


def test_a_variant_that_is_wrong_is_recorded_so(whole_off, monkeypatch) -> None:
    """A variant whose result differs from eager's gets ``inf`` and the reason, and the
    served path's time stands."""
    real = matmul.matmul_ruled_into

    def wrong_when_off(out, *args, **kwargs):
        real(out, *args, **kwargs)
        if not matmul.SPLIT_WHOLE_WAVES:
            out.add_(1.0)
        return out

    monkeypatch.setattr(matmul, "matmul_ruled_into", wrong_when_off)
    row = {"half": "tuning", "op": "mm.default", "batch": 1, "M": 40, "N": 33, "K": 24,
           "args": "((T([40, 24], f16), T([24, 33], f16)), {})"}  # fmt: skip
    res = paths.time_product(row, "cpu", lambda fn: (fn(), 1.0)[1], served_only=True)
    assert res["times"]["served:"] == 1.0
    assert math.isinf(res["times"]["served@rounded_up:"])
    assert res["errors"]["served@rounded_up:"] == "wrong result"


def test_the_summary_splits_moved_products_from_the_rest() -> None:
    """Per half: the geomean of served over the variant on the products it moved past the
    noise, and on the rest; a product either side failed on is left out."""

    def row(half: str, served: float, variant: float) -> dict:
        return {"half": half, "times": {"served:": served, "served@v:": variant}}

    rows = [row("tuning", 2.0, 1.0), row("tuning", 1.0, 0.5),
            row("tuning", 1.0, 1.01), row("heldout", 1.0, 1.0), row("heldout", 1.0, math.inf)]  # fmt: skip
    lines = paths.variant_summary(rows)
    tuning = next(line for line in lines if line.startswith("| v | tuning"))
    heldout = next(line for line in lines if line.startswith("| v | heldout"))
    # moved: 2.0 / 1.0 and 1.0 / 0.5, geomean 2; the rest: 1 / 1.01
    assert tuning == f"| v | tuning | 3 | 2 | 2.000 | {1 / 1.01:.3f} |", tuning
    assert heldout == "| v | heldout | 1 | 0 | - | 1.000 |", heldout


def test_the_small_sweep_times_the_small_rules_candidates(monkeypatch) -> None:
    """``--small``: the served path (the tables, outside the shape rule's domain) and every
    other candidate of the small-product rule; nothing of the shape rule's own set."""
    from opbench.kernels._lib import matmul_rule

    monkeypatch.setattr(paths, "SMALL_ONLY", [True])
    row = {"batch": 1, "M": 64, "N": 1000, "K": 2048}
    kernels = paths._kernels(row, served_only=False)
    want = [c for c in matmul_rule.small_candidates(1, 64, 1000, 2048) if c[0] != "tables"]
    assert kernels == [("served", None), *want] and len(want) == len(matmul_rule.SMALL_TILES)
    # --skip-from an earlier --small sweep: only what it lacks
    timed = [paths.time_key(k, c) for k, c in want[:5]]
    assert paths._kernels({**row, "timed": timed}, served_only=False) == [
        ("served", None), *want[5:]]  # fmt: skip
    monkeypatch.setattr(paths, "SMALL_ONLY", [False])
    assert paths._kernels(row, served_only=False) != kernels
