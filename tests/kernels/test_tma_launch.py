"""Repeat launches of the TMA kernels (``tma_launch.launch``: after a plan's first launch,
the compiled kernel is launched directly and each ``CUtensorMap`` kept per address and
geometry) against eager: new operands at new addresses, then new values at an address a
kept descriptor already points to, must each give eager's result. Under the interpreter
only the plans repeat; compiled (``OPBENCH_KERNEL_DEVICE=cuda``, Triton 3.6) the test
also checks that the direct launch served the repeats."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")
import triton  # noqa: E402
from kernel_checks import DEVICE, assert_matches  # noqa: E402

from opbench.kernels._lib import tma_launch  # noqa: E402
from opbench.kernels._lib.matmul_tma import tma_matmul_into  # noqa: E402
from opbench.kernels._lib.matmul_tma_batched import tma_bmm_into  # noqa: E402

CFG = (32, 32, 32, 8, 4, 2)


def _r(*shape: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(DEVICE, torch.float16)


def _direct_served() -> None:
    if DEVICE != "cpu" and triton.__version__.startswith("3.6."):
        assert any(v is not None for v in tma_launch._DIRECT.values())
        assert tma_launch._MAPS


@pytest.mark.parametrize("batched", [False, True])
def test_repeat_launches_read_each_call_operands(batched: bool) -> None:
    B = 3 if batched else 1
    into = tma_bmm_into if batched else tma_matmul_into
    kept = None
    for seed in range(4):
        a, b = _r(B, 64, 40, seed=seed), _r(B, 40, 48, seed=seed + 10)
        bias = _r(48, seed=seed + 20)
        if kept is not None and seed == 3:  # new values where a kept descriptor points
            kept[0].copy_(a)
            kept[1].copy_(b)
            a, b = kept[0], kept[1]
        out = torch.full((B, 64, 48), float("nan"), dtype=torch.float16, device=DEVICE)
        assert into(out, a, b, bias.expand(B, 64, 48), 0.5, 2.0, CFG)
        assert_matches(out, lambda x, p, q: torch.baddbmm(x, p, q, alpha=0.5, beta=2.0),
                       bias.expand(B, 64, 48), a, b)  # fmt: skip
        if seed == 1:
            kept = (a, b)
    _direct_served()
