"""Repeat launches of the TMA kernels (``tma_launch.launch``: after a plan's first launch
through ``kernel[grid]``, the compiled kernel through ``CompiledKernel.run``) and the
matmul entry points' lanes against eager: new operands at new addresses, then new values
at an address an earlier call used, must each give eager's result. Under the interpreter
only the plans repeat; compiled (``OPBENCH_KERNEL_DEVICE=cuda``, Triton 3.6) the lanes
run too."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")
import triton  # noqa: E402
from kernel_checks import DEVICE, assert_matches  # noqa: E402

from opbench.kernels._lib.matmul_tma import tma_matmul_into  # noqa: E402
from opbench.kernels._lib.matmul_tma_batched import tma_bmm_into  # noqa: E402

CFG = (32, 32, 32, 8, 4, 2)


def _r(*shape: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(DEVICE, torch.float16)


def _ternary(*shape: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-1, 2, shape, generator=g).to(DEVICE, torch.float16)


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


@pytest.mark.skipif(DEVICE == "cpu", reason="lanes are made by compiled TMA launches")
@pytest.mark.parametrize("op", ["mm", "addmm", "bmm", "baddbmm"])
def test_entry_point_lanes_repeat_eager(op: str) -> None:
    """An entry point's repeat call of a signature runs its lane (``matmul._LANES``):
    each call's operands and bias read where they lie, alpha and beta as given, and an
    operand off 16-byte alignment (a view one element in) sent back to the full path;
    every result is eager's. 1024^3: over the shape rule's GFLOP, so the rule serves;
    entries in {-1, 0, 1}, so every sum is exact in float32 and its float16 rounding the
    same on both sides (random normals put a sum of 1,024 products near zero, where a
    single rounding step exceeds the elementwise tolerance)."""
    from opbench.kernels._lib import matmul

    batched = op in ("bmm", "baddbmm")
    ours, eager = getattr(matmul, op), getattr(torch, op)
    matmul._LANES.clear()
    for seed in range(4):
        # rows 1032 elements apart (16-byte aligned); seed 3 starts one element in
        a = _ternary(*((1,) if batched else ()), 1024, 1032, seed=seed)
        a = a[..., 1:1025] if seed == 3 else a[..., :1024]
        b = _ternary(*((1,) if batched else ()), 1024, 1024, seed=seed + 10)
        args = (a, b)
        kw = {}
        if op in ("addmm", "baddbmm"):
            args = (_ternary(1024, seed=seed + 20), a, b)
            kw = {"alpha": 0.5, "beta": 2.0}
        assert_matches(ours(*args, **kw), eager, *args, **kw)
    if triton.__version__.startswith("3.6."):
        assert matmul._LANES, "no lane was kept: the repeats took the full path"


def test_a_lane_that_raises_turns_lanes_off(monkeypatch) -> None:
    """A lane whose launch raises (the launcher refusing its arguments: nothing launched)
    sends the call down the full path, with a warning, and no lane is used or kept in the
    process after it: the result is still eager's."""
    from opbench.kernels._lib import matmul

    monkeypatch.setattr(matmul, "_LANES", {})
    monkeypatch.setattr(matmul, "_LANES_OFF", [])
    a, b = _r(24, 40, seed=1), _r(40, 16, seed=2)

    def refused(*args: object) -> bool:
        raise TypeError("an argument the launcher cannot read")

    key = matmul._lane_key(a, b)
    matmul._LANES[key] = refused
    with pytest.warns(RuntimeWarning, match="lanes are off"):
        got = matmul.mm(a, b)
    assert_matches(got, torch.mm, a, b)
    assert not matmul._LANES and matmul._LANES_OFF
    matmul._keep_lane(key, [refused])
    assert not matmul._LANES
