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


@pytest.mark.skipif(DEVICE == "cpu", reason="lanes are made by compiled launches")
@pytest.mark.parametrize("size", ["large", "small", "skinny"])
@pytest.mark.parametrize("op", ["mm", "addmm", "bmm", "baddbmm"])
def test_entry_point_lanes_repeat_eager(op: str, size: str) -> None:
    """An entry point's repeat call of a signature runs its lane (``matmul_lanes.LANES``):
    each call's operands and bias read where they lie, alpha and beta as given, and an
    operand off 16-byte alignment (a view one element in) sent back to the full path;
    every result is eager's. "large" is 1024^3, over the shape rule's GFLOP, so the rule
    serves it (a TMA kernel); "small" is a batch of 8 products of 96x80x72 (the pointer
    kernel); "skinny" 128x2048x2048, split over K (a workspace and a sum in the lane). Entries in {-1, 0, 1}, so every sum is exact in float32 and its float16
    rounding the same on both sides (random normals put a sum of 1,024 products near zero,
    where a single rounding step exceeds the elementwise tolerance)."""
    from opbench.kernels._lib import matmul, matmul_lanes

    batched = op in ("bmm", "baddbmm")
    M, K, N, B = {"large": (1024, 1024, 1024, 1), "small": (96, 80, 72, 8),
                  "skinny": (128, 2048, 2048, 1)}[size]  # fmt: skip
    ours, eager = getattr(matmul, op), getattr(torch, op)
    matmul_lanes.LANES.clear()
    for seed in range(4):
        # rows K + 8 elements apart (16-byte aligned); seed 3 starts one element in
        a = _ternary(*((B,) if batched else ()), M, K + 8, seed=seed)
        a = a[..., 1 : K + 1] if seed == 3 else a[..., :K]
        b = _ternary(*((B,) if batched else ()), K, N, seed=seed + 10)
        args = (a, b)
        kw = {}
        if op in ("addmm", "baddbmm"):
            args = (_ternary(N, seed=seed + 20), a, b)
            kw = {"alpha": 0.5, "beta": 2.0}
        assert_matches(ours(*args, **kw), eager, *args, **kw)
    if triton.__version__.startswith("3.6."):
        assert matmul_lanes.LANES, "no lane was kept: the repeats took the full path"


def test_a_lane_that_raises_turns_lanes_off(monkeypatch) -> None:
    """A lane whose launch raises (the launcher refusing its arguments: nothing launched)
    sends the call down the full path, with a warning, and no lane is used or kept in the
    process after it: the result is still eager's."""
    from opbench.kernels._lib import matmul, matmul_lanes

    monkeypatch.setattr(matmul_lanes, "LANES", {})
    monkeypatch.setattr(matmul_lanes, "LANES_OFF", [])
    a, b = _r(24, 40, seed=1), _r(40, 16, seed=2)

    def refused(*args: object) -> bool:
        raise TypeError("an argument the launcher cannot read")

    key = matmul_lanes.lane_key(a, b)
    matmul_lanes.LANES[key] = refused
    with pytest.warns(RuntimeWarning, match="lanes are off"):
        got = matmul.mm(a, b)
    assert_matches(got, torch.mm, a, b)
    assert not matmul_lanes.LANES and matmul_lanes.LANES_OFF
    matmul_lanes.keep(key, [refused])
    assert not matmul_lanes.LANES


class _Kernel:
    """Stands in for a compiled kernel (``CompiledKernel``): its launcher records calls."""

    name = "stand_in"
    function = 7
    packed_metadata = "packed"

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def run(self, *args: object) -> None:
        self.calls.append(args)


class _Driver:
    """Stands in for ``triton.runtime.driver.active``: one stream, 99."""

    @staticmethod
    def get_current_stream(index: int) -> int:
        return 99


def _stub_triton(monkeypatch) -> None:
    from types import SimpleNamespace

    from opbench.kernels._lib import tma_launch

    fake = SimpleNamespace(runtime=SimpleNamespace(driver=SimpleNamespace(active=_Driver())))
    monkeypatch.setattr(tma_launch, "triton", fake)


def _launch_args(pa: int, pb: int, pc: int, px: int, *, template: bool = True) -> tuple:
    """A launch's arguments: two descriptors, two pointers (an ``Address`` as a repeat's
    template holds them, else as the addresses the C launch receives), two sizes, alpha,
    beta and a constexpr."""
    from opbench.kernels._lib.tma_launch import Address, Desc

    if template:
        pc, px = Address(pc), Address(px)
    return (Desc(Address(pa), [64, 40], [40, 1], [32, 32]),
            Desc(Address(pb), [48, 40], [40, 1], [32, 32]), pc, px, 64, 48, 0.5, 2.0, "TAIL")  # fmt: skip


def test_repeater_through_run_reads_each_call_addresses_and_scalars(monkeypatch) -> None:
    """Without a direct launch (another Triton), a repeat hands ``CompiledKernel.run`` the
    launch's arguments with each call's addresses and scalars, and nothing else changed."""
    from opbench.kernels._lib import tma_launch

    _stub_triton(monkeypatch)
    k = _Kernel()
    monkeypatch.setitem(tma_launch._DIRECT, k, None)
    first = _launch_args(1024, 2048, 4096, 8192)
    repeat = tma_launch.repeater(k, (5, 1, 1), 0, first, (0, 1, 2, 3), (6, 7))
    repeat((16, 32, 48, 64), 3.0, 4.0)
    (got,) = k.calls
    assert got[:9] == (5, 1, 1, 99, 7, "packed", None, None, None)
    da, db, pc, px, *rest = got[9:]
    assert (da.base.data_ptr(), db.base.data_ptr(), pc, px) == (16, 32, 48, 64)
    assert (da.shape, da.strides, da.block_shape) == ([64, 40], [40, 1], [32, 32])
    assert (db.shape, db.strides) == ([48, 40], [40, 1])
    assert rest == [64, 48, 3.0, 4.0, "TAIL"]


def test_repeater_launches_what_a_direct_launch_of_the_same_call_launches(monkeypatch) -> None:
    """With Triton 3.6's direct launch, a repeat over new addresses passes the C launch
    exactly what :func:`tma_launch.launch` passes for a launch at those addresses: each
    descriptor as its ``CUtensorMap``, shape and strides, one map made per address."""
    from opbench.kernels._lib import tma_launch

    _stub_triton(monkeypatch)
    monkeypatch.setattr(tma_launch._launch, "_hooks", lambda: (None, None))
    monkeypatch.setattr(tma_launch, "_MAPS", {})
    k = _Kernel()
    launched: list[tuple] = []
    filled: list[int] = []

    def fill(ptr: int, *rest: object) -> tuple:
        filled.append(ptr)
        return ("map", ptr, rest)

    meta = {
        "fp4_padded": False,
        "swizzle": 3,
        "elem_size": 2,
        "elem_type": 1,
        "block_size": [32, 32],
    }
    direct = tma_launch.Direct(lambda *a: launched.append(a), (0, 0, None, None), (0, 1),
                               (meta, meta), fill, {1: 1})  # fmt: skip
    monkeypatch.setitem(tma_launch._DIRECT, k, direct)
    repeat = tma_launch.repeater(k, (5, 1, 1), 0, _launch_args(1024, 2048, 4096, 8192),
                                 (0, 1, 2, 3), (6, 7))  # fmt: skip
    for addresses in ((16, 32, 48, 64), (16, 32, 48, 64), (80, 32, 48, 64)):
        repeat(addresses, 3.0, 4.0)
        args = _launch_args(*addresses, template=False)
        tma_launch.launch(k, 5, 0, (*args[:6], 3.0, 4.0, "TAIL"))
        assert launched[-2] == launched[-1]
        assert launched[-1][-3:] == (3.0, 4.0, "TAIL")
    assert launched[0][13] == ("map", 16, (3, 2, 1, [32, 32], [64, 40], [40, 1], 0))
    assert filled == [16, 32, 80]
