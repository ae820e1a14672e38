"""Roofline counting against hand formulas, and the cheat rule."""

from __future__ import annotations

import pytest
import torch

from opbench.judge.roofline import (
    Peaks,
    Work,
    cheat_check,
    dtype_name,
    roofline,
    unique_bytes,
    work_of,
)

aten = torch.ops.aten


def test_stride_zero_input_counts_once():
    z = torch.randn(1).expand(96, 1000)
    w = work_of("add.Tensor", [z, z], {}, z + z)
    assert w.read_bytes == 4  # one float, shared by both arguments
    assert w.write_bytes == 96 * 1000 * 4
    assert w.flops == 96 * 1000


def test_overlapping_views_of_one_buffer_count_once():
    base = torch.randn(100)
    assert unique_bytes([base[:60], base[40:]]) == 400
    assert unique_bytes([base[::2]]) == 50 * 4  # a strided slice counts elements, not gaps
    assert unique_bytes([base, torch.randn(10)]) == 440


def test_matmul_family_flops():
    a, b = torch.randn(64, 32), torch.randn(32, 16)
    assert work_of("mm.default", [a, b], {}, a @ b).flops == 2 * 64 * 16 * 32
    c = torch.randn(16)
    out = torch.addmm(c, a, b)
    assert work_of("addmm.default", [c, a, b], {}, out).flops == 2 * 64 * 16 * 32 + 64 * 16
    x, y = torch.randn(3, 8, 5), torch.randn(3, 5, 7)
    assert work_of("bmm.default", [x, y], {}, torch.bmm(x, y)).flops == 2 * 3 * 8 * 7 * 5
    m = torch.randn(3, 8, 7)
    out = torch.baddbmm(m, x, y)
    assert work_of("baddbmm.default", [m, x, y], {}, out).flops == 2 * 3 * 8 * 7 * 5 + 3 * 8 * 7


def test_convolution_flops_forward_and_backward():
    x, w = torch.randn(2, 6, 9, 9), torch.randn(4, 3, 3, 3)  # groups=2
    args = [x, w, None, [2, 2], [1, 1], [1, 1], False, [0, 0], 2]
    y = aten.convolution.default(*args)
    assert y.shape == (2, 4, 5, 5)
    assert work_of("convolution.default", args, {}, y).flops == 2 * y.numel() * 3 * 9
    go = torch.randn_like(y)
    bargs = [go, x, w, [4], [2, 2], [1, 1], [1, 1], False, [0, 0], 2, [True, True, False]]
    grads = aten.convolution_backward.default(*bargs)
    assert work_of("convolution_backward.default", bargs, {}, grads).flops == 2 * (
        2 * y.numel() * 27
    )


def test_views_and_partial_gathers_do_not_inflate_bytes():
    t = torch.randn(1000)
    assert work_of("unsqueeze.default", [t, 0], {}, t.unsqueeze(0)).bytes == 0
    table, idx = torch.randn(50000, 64), torch.randint(0, 50000, (8,))
    w = work_of("embedding.default", [table, idx], {}, torch.embedding(table, idx))
    assert w.read_bytes < 10 * 8 * 64 * 4  # not the whole 12.8 MB table


def test_in_place_writes_count_self():
    t, u = torch.randn(100), torch.randn(100)
    w = work_of("add_.Tensor", [t, u], {}, t.add_(u))
    assert w.read_bytes == 800 and w.write_bytes == 400


def test_roofline_fraction_and_cheat_rule():
    peaks = Peaks(bandwidth_Bps=1e12, matmul_flops={"f16": 1e15, "f32": 1e14}, l2_bytes=50_000_000)
    work = Work(
        bytes=2_000_000_000,
        flops=0,
        formula="",
        read_bytes=1_000_000_000,
        write_bytes=1_000_000_000,
    )
    r = roofline(work, 4.0, peaks, "f16")
    assert r["floor_ms"] == pytest.approx(2.0) and r["sol_fraction"] == pytest.approx(0.5)
    # floor counts reads + writes beyond L2: (1e9 + 0.95e9) / 1e12 s = 1.95 ms
    assert cheat_check(work, 1.5, peaks) is None
    assert cheat_check(work, 0.9, peaks) is not None  # < 0.5 x 1.95 ms
    small_out = Work(bytes=1_040_000, flops=0, formula="", read_bytes=40_000, write_bytes=1_000_000)
    assert cheat_check(small_out, 0.001, peaks) is None  # output fits in L2; 40 KB read: 0.04 us
    mm = Work(bytes=0, flops=10**12, formula="", read_bytes=0, write_bytes=0)
    assert cheat_check(mm, 0.4, peaks, dtype=torch.float16) is not None  # floor 1 ms
    assert cheat_check(mm, 0.8, peaks, dtype=torch.float16) is None


@pytest.mark.parametrize("spelling", [torch.float16, "torch.float16", "float16", "f16"])
def test_every_dtype_spelling_finds_its_own_matmul_rate(spelling):
    # The worker reports dtypes as "float16": a lookup that fell back to the f32 rate
    # (51 TFLOP/s on an H100, against ~750 for f16) flagged honest aten mm as a cheat.
    peaks = Peaks(bandwidth_Bps=3e12, matmul_flops={"f16": 7.5e14, "f32": 5e13, "tf32": 4e14})
    assert dtype_name(spelling) == "f16"
    assert peaks.flops_for(spelling) == 7.5e14


def test_unmeasured_dtype_gets_the_highest_rate_so_cheats_are_never_overcalled():
    peaks = Peaks(bandwidth_Bps=3e12, matmul_flops={"f16": 7.5e14, "f32": 5e13})
    assert peaks.flops_for("int8") == 7.5e14
    assert peaks.flops_for(None) == 7.5e14
    assert peaks.flops_for("f32") == 5e13
