"""``benchmarks/common/kernel_overrides.py``: the ``--set MODULE.NAME=VALUE`` of the GPU scripts
sets a kernel module's constant to a Python literal and refuses a name the module lacks
(a typo would otherwise time the defaults under the variant's label)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("triton")

from opbench.kernels._lib import conv_backward, reduction  # noqa: E402


def _module():
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "common" / "kernel_overrides.py"
    spec = importlib.util.spec_from_file_location("kernel_overrides", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_sets_literals_and_reports_them(monkeypatch) -> None:
    monkeypatch.setattr(conv_backward, "WGRAD_BLOCK_K", conv_backward.WGRAD_BLOCK_K)
    monkeypatch.setattr(reduction, "ROW_TILES", reduction.ROW_TILES)
    done = _module().apply_overrides(
        ["conv_backward.WGRAD_BLOCK_K=128", "reduction.ROW_TILES=((None, 1, 2048),)"]
    )
    assert conv_backward.WGRAD_BLOCK_K == 128 and reduction.ROW_TILES == ((None, 1, 2048),)
    assert done == {"conv_backward.WGRAD_BLOCK_K": 128, "reduction.ROW_TILES": ((None, 1, 2048),)}


def test_unknown_name_ends_the_run() -> None:
    with pytest.raises(SystemExit, match="conv_backward has no WGRAD_BLOCK_Q"):
        _module().apply_overrides(["conv_backward.WGRAD_BLOCK_Q=1"])


def test_overridden_restores_the_settings_and_empties_the_plans() -> None:
    """Inside the block the variant's values and no plan kept from before; after it (also
    when the block fails) the values before and no plan the block made."""
    before = conv_backward.WGRAD_BLOCK_K
    plans = {"kept": "made under the defaults"}
    with pytest.raises(RuntimeError, match="the block failed"):
        with _module().overridden(["conv_backward.WGRAD_BLOCK_K=128"], [plans]) as done:
            assert conv_backward.WGRAD_BLOCK_K == 128 and done == {
                "conv_backward.WGRAD_BLOCK_K": 128
            }
            assert not plans
            plans["new"] = "made under the variant"
            raise RuntimeError("the block failed")
    assert conv_backward.WGRAD_BLOCK_K == before and not plans


def test_overridden_restores_what_it_set_before_a_bad_name() -> None:
    before = conv_backward.WGRAD_BLOCK_K
    with pytest.raises(SystemExit, match="no WGRAD_BLOCK_Q"):
        with _module().overridden(
            ["conv_backward.WGRAD_BLOCK_K=128", "conv_backward.WGRAD_BLOCK_Q=1"]
        ):
            pass
    assert conv_backward.WGRAD_BLOCK_K == before
