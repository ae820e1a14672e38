"""``benchmarks/probes/check_model_flips.py``: eager's and a backend's ReLU inputs and
gradient errors side by side. The aten backend through the registry matches eager bit
for bit (no element differs, every gradient's error is eager's own); a backend whose
residual ``add`` is off by 100 differs at the first ReLU after it and flips signs."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "backends"))
from kernel_dirs import MARKED_KERNELS, write_dir  # noqa: E402


@pytest.fixture
def flips(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks" / "probes"))
    import check_model_flips

    yield check_model_flips
    sys.modules.pop("check_model_flips", None)


def test_aten_backend_matches_eager_everywhere(flips) -> None:
    out = flips.compare("resnet", "aten", "cpu", None, None)
    assert len(out["relus"]) == 4  # two a block: after its first convolution, and its output
    assert all(r["differ"] == 0 and r["flips"] == 0 for r in out["relus"])
    assert out["grads"] and all(r["backend_err"] == r["eager_err"] for r in out["grads"])
    assert torch.relu is torch._C._VariableFunctions.relu  # restored


def test_a_wrong_add_shows_at_the_relu_after_it(flips, tmp_path: Path) -> None:
    kernels = {k: v for k, v in MARKED_KERNELS.items() if k.startswith("add__Tensor")}
    backend = write_dir(tmp_path, kernels)
    out = flips.compare("resnet", str(backend), "cpu", None, ["add.Tensor"])
    inner, block_out = out["relus"][:2]
    assert inner["differ"] == 0  # the first block's first ReLU comes before any add
    # its output, relu(y + short(x)): every element 100 too large, the negative ones flipped
    assert block_out["differ"] == math.prod(block_out["shape"])
    assert block_out["flips"] > 0
    assert out["grads"][0]["ratio"] > 10
