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
