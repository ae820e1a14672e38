"""Batch norm's planes kernels (channels not adjacent in memory: NCHW) at the GPU's tiling,
shrunk to interpreter scale: tiles that cut ``n`` and ``s`` with remainders, statistics
split over several programs per channel and merged by the apply kernel, or one program
per channel (fused); forward and backward, training and eval, every output_mask, f32 and
f16, a spatial stride that is not 1, and a grad_out in another layout than the input;
against eager (and a float64 reference, as the judge checks)."""

from __future__ import annotations

import itertools

import pytest
import torch

pytest.importorskip("triton")

from kernel_checks import (  # noqa: E402
    DEVICE,
    assert_batch_norm_backward_matches,
    assert_matches,
    meta,
)

from opbench.kernels._lib import batch_norm as bn  # noqa: E402
from opbench.kernels._lib import batch_norm_backward as bn_bwd  # noqa: E402
from opbench.kernels._lib import batch_norm_planes as planes  # noqa: E402

aten = torch.ops.aten
MASKS = [list(m) for m in itertools.product([True, False], repeat=3)]


def _rand(*shape: int, dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g) * 2 + 3.0).to(DEVICE, dtype)


@pytest.fixture(params=["split", "fused"])
def gpu_tiling(request, monkeypatch) -> str:
    """Tiles of at most 32 elements, at most 8 along ``s``; split: up to 3 programs per
    channel (12 targeted over 4 channels), fused: one per channel."""
    monkeypatch.setattr(planes, "BNP_TILE", 32)
    monkeypatch.setattr(planes, "BNP_MAX_S", 8)
    monkeypatch.setattr(planes, "BNP_TARGET_PROGRAMS", 12)
    monkeypatch.setattr(planes, "BNP_FUSE_MIN_CHANNELS", 1 if request.param == "fused" else 10**6)
    monkeypatch.setattr(planes, "BNP_FUSE_MAX_ELEMENTS", 1 << 30)
    monkeypatch.setattr(bn, "_BN_FWD_PLANS", {})
    monkeypatch.setattr(bn_bwd, "_BN_BWD_PLANS", {})
    return request.param


def _inputs(layout: str, dtype: torch.dtype) -> torch.Tensor:
    if layout == "strided_s":  # [N, C, L] read every other L: sS = 2
        return _rand(5, 4, 22, dtype=dtype)[:, :, ::2]
    return _rand(5, 4, 3, 4, dtype=dtype)  # S = 12: an 8-wide s block and a remainder


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("layout", ["nchw", "strided_s"])
def test_planes_forward_and_backward(gpu_tiling: str, layout: str, dtype: torch.dtype) -> None:
    x = _inputs(layout, dtype)
    C = x.shape[1]
    w = _rand(C, dtype=dtype, seed=1)
    b = _rand(C, dtype=dtype, seed=2)
    rm = _rand(C, dtype=dtype, seed=3)
    rv = torch.rand(C, generator=torch.Generator().manual_seed(4)).to(DEVICE, dtype) + 0.5
    p = planes.PlanesPlan(x.shape[0], C, x[0, 0].numel(), fuse=True)
    assert p.fused == (gpu_tiling == "fused")
    assert p.n_tiles > 1 and (p.fused or p.split > 1)
    g = _rand(*x.shape, dtype=dtype, seed=5)
    tol = {"atol": 1e-5, "rtol": 1e-5} if dtype == torch.float32 else {"atol": 1e-2, "rtol": 2e-2}
    for training in (True, False):
        for ww, bb in ((w, b), (None, None)):
            ours_rm, ours_rv = rm.clone(), rv.clone()
            got = bn.batch_norm(x, ww, bb, ours_rm, ours_rv, training, 0.1, 1e-5)
            eager_rm, eager_rv = rm.clone(), rv.clone()
            want = aten.native_batch_norm(x, ww, bb, eager_rm, eager_rv, training, 0.1, 1e-5)
            assert [meta(t) for t in got] == [meta(t) for t in want]
            assert_matches(
                got, aten.native_batch_norm, x, ww, bb, rm.clone(), rv.clone(), training,
                0.1, 1e-5,
            )  # fmt: skip
            torch.testing.assert_close(ours_rm.double(), eager_rm.double(), **tol)
            torch.testing.assert_close(ours_rv.double(), eager_rv.double(), **tol)
        # the batch's statistics in eval mode too (unlike the running ones: eager on CUDA
        # reads them outside its fused kernel, batch_norm_backward._reads_running)
        _, sm, si = aten.native_batch_norm(x, w, b, rm.clone(), rv.clone(), True, 0.1, 1e-5)
        for mask in MASKS:
            for ww in (w, None):
                args = (g, x, ww, rm, rv, sm, si, training, 1e-5, mask)
                assert_batch_norm_backward_matches(bn_bwd.batch_norm_backward, *args)


def test_planes_grad_in_another_layout(gpu_tiling: str) -> None:
    x = _rand(3, 5, 4, 3, dtype=torch.float32)
    g = _rand(3, 5, 4, 3, dtype=torch.float32, seed=7).to(memory_format=torch.channels_last)
    _, sm, si = aten.native_batch_norm(x, None, None, None, None, True, 0.1, 1e-5)
    w = _rand(5, dtype=torch.float32, seed=8)  # a weight: CUDA eager's no-weight quirks aside
    args = (g, x, w, None, None, sm, si, True, 1e-5, [True, True, True])
    got = bn_bwd.batch_norm_backward(*args)
    assert got[0].stride() == x.stride()
    assert_matches(got, aten.native_batch_norm_backward, *args)


def test_planes_statistics_of_a_large_offset() -> None:
    """Values far from zero with a small spread: the shifted sums keep the variance
    (a plain sum of squares in float32 would lose it to cancellation)."""
    x = (torch.randn(4, 3, 5, 5, generator=torch.Generator().manual_seed(0)) * 1e-2 + 1e3).to(
        DEVICE
    )
    got = bn.batch_norm(x, None, None, None, None, True, 0.1, 1e-5)
    assert_matches(got, aten.native_batch_norm, x, None, None, None, None, True, 0.1, 1e-5)


def test_rows_statistics_of_a_large_offset() -> None:
    """The same for the row tiles (channels-last)."""
    x = (torch.randn(4, 3, 5, 5, generator=torch.Generator().manual_seed(0)) * 1e-2 + 1e3).to(
        DEVICE, memory_format=torch.channels_last
    )
    got = bn.batch_norm(x, None, None, None, None, True, 0.1, 1e-5)
    assert_matches(got, aten.native_batch_norm, x, None, None, None, None, True, 0.1, 1e-5)


def test_plane_runs_divide_the_positions_and_the_plane_strides() -> None:
    """``SV``: 4 for 14x14 planes, 8 for 56x56, 1 for 7x7 or where positions are strided
    (the kernels then restate nothing); a channel slice's strides count too."""
    nchw = lambda c, s: (c * s, s, 1)  # noqa: E731
    assert planes.plane_runs(196, nchw(256, 196), nchw(256, 196)) == 4
    assert planes.plane_runs(3136, nchw(64, 3136), nchw(64, 3136)) == 8
    assert planes.plane_runs(49, nchw(512, 49)) == 1
    assert planes.plane_runs(196, (256 * 196, 196, 2)) == 1
    assert planes.plane_runs(196, nchw(256, 196), (255 * 196 + 2, 196, 1)) == 2
