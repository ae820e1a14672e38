"""Layer norm and batch norm, forward and backward, against eager PyTorch on CPU (Triton's
interpreter): f32, f16, bf16 (and f64), weight/bias present or None, rows kept whole and
rows in chunks, 2-D to 5-D batch norm in contiguous and channels-last layouts, training
(running statistics updated in place) and eval, every output_mask, empty inputs, and the
exact metadata of mean/rstd and save_mean/save_invstd (FlagGems gets both wrong), checked
as the judge checks them (against eager and a float64 reference)."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys

import pytest
import torch

pytest.importorskip("triton")

from kernel_checks import (  # noqa: E402
    DEVICE,
    assert_batch_norm_backward_matches,
    assert_batch_norm_both_ways,
    assert_matches,
    launch_constants,
    meta,
)

from opbench.kernels._lib import batch_norm as bn  # noqa: E402
from opbench.kernels._lib import batch_norm_backward as bn_bwd  # noqa: E402
from opbench.kernels._lib import norm  # noqa: E402

aten = torch.ops.aten
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
MASKS = [list(m) for m in itertools.product([True, False], repeat=3)]


def _rand(*shape: int, dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g) * 2 + 0.5).to(DEVICE, dtype)


# ----------------------------------------------------------------------------- layer norm

LN_CASES = {
    "last_dim": ((3, 5, 7), [7]),
    "two_dims": ((4, 6, 10), [6, 10]),
    "all_dims": ((3, 4), [3, 4]),
    "chunked_rows": ((2, norm.MAX_ROW_BLOCK + 3), [norm.MAX_ROW_BLOCK + 3]),
}


@pytest.mark.parametrize("affine", ["both", "none", "weight_only"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", sorted(LN_CASES))
def test_layer_norm(case: str, dtype: torch.dtype, affine: str) -> None:
    shape, ns = LN_CASES[case]
    x = _rand(*shape, dtype=dtype)
    w = _rand(*ns, dtype=dtype, seed=1) if affine != "none" else None
    b = _rand(*ns, dtype=dtype, seed=2) if affine == "both" else None
    got = norm.layer_norm(x, ns, w, b, 1e-5)
    assert_matches(got, aten.native_layer_norm, x, ns, w, b, 1e-5)
    assert [meta(t) for t in got] == [meta(t) for t in aten.native_layer_norm(x, ns, w, b, 1e-5)]


def test_layer_norm_metadata() -> None:
    x = _rand(2, 3, 4, 5, dtype=torch.float16)
    _, mean, rstd = norm.layer_norm(x, [4, 5], None, None, 1e-5)
    assert mean.shape == rstd.shape == (2, 3, 1, 1)  # FlagGems: [6]
    # eager on the CPU keeps f16 statistics, on CUDA float32
    assert mean.dtype == rstd.dtype == (torch.float16 if DEVICE == "cpu" else torch.float32)
    # the CPU's mixed-type path: f16 input with a float32 weight keeps float32 statistics
    _, mean, _ = norm.layer_norm(x, [4, 5], torch.ones(4, 5, device=DEVICE), None, 1e-5)
    assert mean.dtype == torch.float32


def test_layer_norm_strided_empty_and_degenerate_eps() -> None:
    x = _rand(7, 3, 5, dtype=torch.float32).permute(1, 0, 2)
    assert_matches(norm.layer_norm(x, [5], None, None, 1e-5), aten.native_layer_norm, x, [5],
                   None, None, 1e-5)  # fmt: skip
    e = torch.empty(0, 4, device=DEVICE)
    assert_matches(norm.layer_norm(e, [4], None, None, 1e-5), aten.native_layer_norm, e, [4],
                   None, None, 1e-5)  # fmt: skip
    # a negative eps (OpInfo uses -0.5) gives NaN where var + eps < 0, as eager
    x = _rand(2, 2, 3, dtype=torch.float32)
    assert_matches(norm.layer_norm(x, [2, 3], None, None, -0.5), aten.native_layer_norm, x,
                   [2, 3], None, None, -0.5)  # fmt: skip


@pytest.mark.parametrize("dtype", DTYPES + [torch.float64], ids=str)
@pytest.mark.parametrize(
    "case", ["last_dim", "two_dims", pytest.param("chunked_rows", marks=pytest.mark.slow)]
)  # chunked rows: 2-3 s a dtype under the interpreter (2026-11-28, --durations)
def test_layer_norm_backward(case: str, dtype: torch.dtype) -> None:
    shape, ns = LN_CASES[case]
    x = _rand(*shape, dtype=dtype)
    w = _rand(*ns, dtype=dtype, seed=1)
    b = _rand(*ns, dtype=dtype, seed=2)
    _, mean, rstd = aten.native_layer_norm(x, ns, w, b, 1e-5)
    g = _rand(*shape, dtype=dtype, seed=3)
    for mask in MASKS:
        got = norm.layer_norm_backward(g, x, ns, mean, rstd, w, b, mask)
        assert [t is None for t in got] == [not m for m in mask]
        assert_matches(got, aten.native_layer_norm_backward, g, x, ns, mean, rstd, w, b, mask)
    mask = [True, False, False]
    got = norm.layer_norm_backward(g, x, ns, mean, rstd, None, None, mask)
    assert_matches(got, aten.native_layer_norm_backward, g, x, ns, mean, rstd, None, None, mask)


def _ln_bwd_check(M: int, ns: list[int], dtype: torch.dtype, masks: list[list[bool]]) -> None:
    """layer_norm_backward of [M, *ns] against eager and the float64 reference."""
    x = _rand(M, *ns, dtype=dtype)
    w = _rand(*ns, dtype=dtype, seed=1)
    b = _rand(*ns, dtype=dtype, seed=2)
    _, mean, rstd = aten.native_layer_norm(x, ns, w, b, 1e-5)
    g = _rand(M, *ns, dtype=dtype, seed=3)
    for mask in masks:
        got = norm.layer_norm_backward(g, x, ns, mean, rstd, w, b, mask)
        assert_matches(got, aten.native_layer_norm_backward, g, x, ns, mean, rstd, w, b, mask)


@pytest.mark.slow  # cases over 3 s together on 2 cores (2026-11-28, --durations)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64], ids=str)
def test_layer_norm_backward_many_programs_and_column_blocks(monkeypatch, dtype) -> None:
    """The GPU's tiling at interpreter scale: several programs looping over tiles (5
    tiles over 3 programs: the last program one short), the last tile partly masked, so
    several partial rows, reduced by column blocks that split the row and row blocks that
    need masks; every output_mask, one launch summing both gradients."""
    monkeypatch.setattr(norm, "MAX_ROW_BLOCK", 8192)  # rows of 60 kept whole (GPU value)
    monkeypatch.setattr(norm, "LN_BWD_TILE", 128)  # 2 rows of 60 (padded to 64) per tile
    monkeypatch.setattr(norm, "LN_BWD_MIN_PROGRAMS", 1)
    monkeypatch.setattr(norm, "LN_BWD_PROGRAMS", 3)  # 5 tiles over 3 programs
    monkeypatch.setattr(norm, "COLSUM_TILE", 16)  # 3 partial rows: 2 blocks of 2, 1 masked
    monkeypatch.setattr(norm, "COLSUM_BLOCK_C", 8)  # 60 columns: 8 blocks, 1 masked
    monkeypatch.setattr(norm, "_LN_BWD_PLANS", {})  # plans made under the values above
    assert norm._ln_bwd_tiles(9, 60) == (True, 2, 64, 4, 3)
    assert norm._colsum_tiles(3) == (2, 8)
    _ln_bwd_check(9, [6, 10], dtype, MASKS)


@pytest.mark.parametrize("stages", [1, 2])
@pytest.mark.parametrize(("M", "n"), [(12, 16), (12, 24), (10, 16), (9, 24)])
def test_layer_norm_backward_full_and_partial_tiles(monkeypatch, M: int, n: int, stages) -> None:
    """The unmasked path (every tile full, rows as wide as the tile: [12, 16] in [4, 16]
    tiles) and each masked one (rows narrower than the tile, a last tile short of rows,
    both), with programs looping over 2 tiles or more, the pipelined loop
    (LN_BWD_STAGES 2) and the column sum over more partial rows than one of its tiles."""
    monkeypatch.setattr(norm, "MAX_ROW_BLOCK", 8192)
    monkeypatch.setattr(norm, "LN_BWD_TILE", 64)  # 4 rows of 16, 2 of 24 or 40 (padded)
    monkeypatch.setattr(norm, "LN_BWD_MIN_PROGRAMS", 1)
    monkeypatch.setattr(norm, "LN_BWD_PROGRAMS", 2)
    monkeypatch.setattr(norm, "LN_BWD_STAGES", stages)
    monkeypatch.setattr(norm, "COLSUM_TILE", 8)  # 2 partial rows: 1 row a block, no mask
    monkeypatch.setattr(norm, "COLSUM_BLOCK_C", 8)
    monkeypatch.setattr(norm, "_LN_BWD_PLANS", {})
    single, block_m, block_n, _, programs = norm._ln_bwd_tiles(M, n)
    assert single and programs == 2 and norm.cdiv(M, block_m) >= 2 * programs - 1
    _ln_bwd_check(M, [n], torch.float16, [[True, True, True], [True, False, True]])
    _ln_bwd_check(M, [n], torch.float64, [[True, True, True]])


def test_layer_norm_backward_tile_rules(monkeypatch) -> None:
    """Rows shrink while there are fewer tiles than LN_BWD_MIN_PROGRAMS; programs share
    the tiles evenly; warps give each thread LN_BWD_PER_THREAD elements (4 to 16)."""
    gpu = dict(
        MAX_ROW_BLOCK=8192, LN_BWD_TILE=4096, LN_BWD_PER_THREAD=32, LN_BWD_PROGRAMS=132,
        LN_BWD_MIN_PROGRAMS=128,
    )  # fmt: skip
    for name, value in gpu.items():
        monkeypatch.setattr(norm, name, value)
    # (M, N): (single, BLOCK_M, BLOCK_N, num_warps, programs)
    plans = {
        (1024, 1024): (True, 4, 1024, 4, 128),  # 256 tiles: 2 a program
        (256, 1024): (True, 2, 1024, 4, 128),
        (512, 1536): (True, 2, 2048, 4, 128),
        (128, 2048): (True, 1, 2048, 4, 128),
        (8192, 1024): (True, 4, 1024, 4, 128),  # 2048 tiles: 16 a program
        (1000, 768): (True, 4, 1024, 4, 125),  # 250 tiles: 2 a program
        (64, 16384): (False, 1, 8192, 8, 64),
        (3, 8): (True, 1, 8, 4, 3),
    }
    for (M, N), plan in plans.items():
        assert norm._ln_bwd_tiles(M, N) == plan, (M, N)
    monkeypatch.setattr(norm, "LN_BWD_TILE", 8192)
    assert norm._ln_bwd_tiles(1024, 1024) == (True, 8, 1024, 8, 128)


@pytest.mark.parametrize("n", [1, 6, 7, 24, 48, 70])
def test_layer_norm_row_widths_and_chunks(monkeypatch, n: int) -> None:
    """Row widths of every alignment (the forward sees ``N`` as ``N // vec * vec``) and
    the long-row path's chunks at interpreter scale (rows of more than 32 in chunks of
    32, several rows per persistent program of the backward)."""
    monkeypatch.setattr(norm, "MAX_ROW_BLOCK", 32)
    monkeypatch.setattr(norm, "LN_BWD_PROGRAMS", 2)
    monkeypatch.setattr(norm, "_LN_FWD_PLANS", {})
    monkeypatch.setattr(norm, "_LN_BWD_PLANS", {})
    x = _rand(5, n, dtype=torch.float16)
    w = _rand(n, dtype=torch.float16, seed=1)
    b = _rand(n, dtype=torch.float16, seed=2)
    out = norm.layer_norm(x, [n], w, b, 1e-5)
    assert_matches(out, aten.native_layer_norm, x, [n], w, b, 1e-5)
    g = _rand(5, n, dtype=torch.float16, seed=3)
    for mask in ([True, True, True], [False, True, False], [False, False, True]):
        got = norm.layer_norm_backward(g, x, [n], out[1], out[2], w, b, mask)
        assert_matches(got, aten.native_layer_norm_backward, g, x, [n], out[1], out[2], w, b,
                       mask)  # fmt: skip


def test_layer_norm_gpu_tiling(monkeypatch) -> None:
    """The H100 plans of the traced shapes (pure arithmetic, GPU constants): forward
    tiles shrink to keep 256 programs where M allows and load 16-byte vectors (the
    backward's: test_layer_norm_backward_tile_rules)."""
    gpu = dict(MAX_ROW_BLOCK=8192, LN_TILE=4096, LN_FWD_MIN_PROGRAMS=256)
    for name, value in gpu.items():
        monkeypatch.setattr(norm, name, value)
    # (M, N): forward (single, BLOCK_M, BLOCK_N, warps)
    plans = {
        (1024, 1024): (True, 4, 1024, 8),
        (256, 1024): (True, 1, 1024, 4),
        (512, 1536): (True, 2, 2048, 8),
        (128, 2048): (True, 1, 2048, 4),
        (8192, 1024): (True, 4, 1024, 8),
        (64, 16384): (False, 1, 8192, 8),
    }
    for (M, N), fwd in plans.items():
        assert norm._ln_fwd_tiles(M, N) == fwd
        assert norm._vec(N) == 16
    assert [norm._vec(n) for n in (1, 6, 7, 24, 48, 1000)] == [1, 2, 1, 8, 16, 8]


def test_layer_norm_backward_empty_rows() -> None:
    def r(*shape: int) -> torch.Tensor:
        return torch.randn(*shape).to(DEVICE)

    ones = torch.ones(4, device=DEVICE)
    args = (r(0, 4), r(0, 4), [4], r(0, 1), r(0, 1), ones, ones.clone(), [True, True, True])
    assert_matches(norm.layer_norm_backward(*args), aten.native_layer_norm_backward, *args)


# ----------------------------------------------------------------------------- batch norm

BN_SHAPES = {
    "2d": ((6, 3), None),
    "3d": ((2, 3, 5), None),
    "4d": ((2, 3, 4, 5), None),
    "4d_channels_last": ((2, 3, 4, 5), torch.channels_last),
    "4d_channels_last_wide": ((3, 70, 2, 2), torch.channels_last),
    "5d_channels_last": ((2, 5, 2, 3, 4), torch.channels_last_3d),
    "4d_transposed": ((2, 3, 4, 5), "transposed"),
}


def _bn_input(case: str, dtype: torch.dtype) -> torch.Tensor:
    shape, layout = BN_SHAPES[case]
    if layout == "transposed":  # spatial dims that do not merge: copied to contiguous
        return _rand(*shape[:2], shape[3], shape[2], dtype=dtype).transpose(2, 3)
    x = _rand(*shape, dtype=dtype)
    return x.to(memory_format=layout) if layout is not None else x


def _bn_params(C: int, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    return (
        _rand(C, dtype=dtype, seed=1),
        _rand(C, dtype=dtype, seed=2),
        _rand(C, dtype=dtype, seed=3),
        torch.rand(C, generator=torch.Generator().manual_seed(4)).to(DEVICE, dtype) + 0.5,
    )


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", sorted(BN_SHAPES))
def test_batch_norm(case: str, dtype: torch.dtype, training: bool) -> None:
    x = _bn_input(case, dtype)
    w, b, rm, rv = _bn_params(x.shape[1], dtype)
    variants = [(w, b, rm, rv), (None, None, rm, rv)]
    if training:
        variants.append((w, b, None, None))
    for ww, bb, r_m, r_v in variants:
        ours_rm = r_m.clone() if r_m is not None else None
        ours_rv = r_v.clone() if r_v is not None else None
        got = bn.batch_norm(x, ww, bb, ours_rm, ours_rv, training, 0.1, 1e-5)
        eager_rm = r_m.clone() if r_m is not None else None
        eager_rv = r_v.clone() if r_v is not None else None
        want = aten.native_batch_norm(x, ww, bb, eager_rm, eager_rv, training, 0.1, 1e-5)
        assert [meta(t) for t in got] == [meta(t) for t in want]
        assert_matches(
            got, aten.native_batch_norm, x, ww, bb,
            r_m.clone() if r_m is not None else None, r_v.clone() if r_v is not None else None,
            training, 0.1, 1e-5,
        )  # fmt: skip
        if r_m is not None:  # running statistics: momentum and the unbiased variance
            tol = (
                {"atol": 1e-5, "rtol": 1e-5}
                if dtype == torch.float32
                else {"atol": 1e-2, "rtol": 2e-2}
            )
            torch.testing.assert_close(ours_rm.double(), eager_rm.double(), **tol)
            torch.testing.assert_close(ours_rv.double(), eager_rv.double(), **tol)


def test_batch_norm_metadata() -> None:
    x = _rand(4, 3, 2, 2, dtype=torch.float16)
    _, sm, si = bn.batch_norm(x, None, None, None, None, True, 0.1, 1e-5)
    # f16 statistics on the CPU, float32 (the accumulate type) on CUDA, as eager there
    sdt = torch.float16 if DEVICE == "cpu" else torch.float32
    assert (sm.shape, sm.dtype, si.shape, si.dtype) == ((3,), sdt, (3,), sdt)
    _, esm, esi = aten.native_batch_norm(x, None, None, None, None, True, 0.1, 1e-5)
    assert (esm.dtype, esi.dtype) == (sdt, sdt)
    # eval mode on the CPU returns empty statistics (CUDA: one a channel); mixed f16 input /
    # f32 params: float32
    rm, rv = torch.zeros(3, device=DEVICE), torch.ones(3, device=DEVICE)
    w = torch.ones(3, device=DEVICE)
    _, sm, si = bn.batch_norm(x, w, None, rm, rv, False, 0.1, 1e-5)
    n = 0 if DEVICE == "cpu" else 3
    assert (sm.shape, sm.dtype, si.shape) == ((n,), torch.float32, (n,))
    _, sm, _ = bn.batch_norm(x, w, None, rm, rv, True, 0.1, 1e-5)
    assert sm.dtype == torch.float32


def test_batch_norm_edge_cases() -> None:
    # one value per channel: the unbiased running variance is NaN, as eager
    x = _rand(1, 3, dtype=torch.float32)

    def ones() -> torch.Tensor:
        return torch.ones(3, device=DEVICE)

    def zeros() -> torch.Tensor:
        return torch.zeros(3, device=DEVICE)

    ours, eager = (ones(), ones()), (ones(), ones())
    bn.batch_norm(x, None, None, zeros(), ours[1], True, 0.1, 1e-5)
    aten.native_batch_norm(x, None, None, zeros(), eager[1], True, 0.1, 1e-5)
    torch.testing.assert_close(ours[1], eager[1], equal_nan=True)
    # empty input in eval mode; training on an empty input raises, as eager
    e = torch.empty(0, 3, device=DEVICE)
    args = (e, None, None, zeros(), ones(), False, 0.1, 1e-5)
    if DEVICE == "cpu":
        assert_matches(bn.batch_norm(*args), aten.native_batch_norm, *args)
    else:  # CUDA eager fails here ("invalid argument", torch 2.11 on the H100)
        y, sm, si = bn.batch_norm(*args)
        assert y.shape == e.shape and torch.equal(sm, zeros())
        torch.testing.assert_close(si, ones() / (1 + 1e-5) ** 0.5)
    with pytest.raises(RuntimeError, match="at least one element"):
        bn.batch_norm(e, None, None, None, None, True, 0.1, 1e-5)
    # momentum and eps from OpInfo's samples (negative momentum is legal)
    x = _rand(3, 2, 3, 4, dtype=torch.float32)
    o2, z2 = torch.ones(2, device=DEVICE), torch.zeros(2, device=DEVICE)
    args = (x, o2, z2, z2.clone(), o2.clone(), True, -1.0, 0.5)
    assert_matches(bn.batch_norm(*args), aten.native_batch_norm, *args)


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("dtype", DTYPES + [torch.float64], ids=str)
@pytest.mark.parametrize(
    # the sampled cases took 6.2 s, 4d's 2.7 and 5d's 1.3 (2026-11-28, --durations); NCHW
    # planes' backward stays in the default run in test_batch_norm_planes.py
    "case",
    [
        "2d",
        pytest.param("4d", marks=pytest.mark.slow),
        "4d_channels_last",
        pytest.param("5d_channels_last", marks=pytest.mark.slow),
    ],
)
def test_batch_norm_backward(case: str, dtype: torch.dtype, training: bool) -> None:
    x = _bn_input(case, dtype)
    w, b, rm, rv = _bn_params(x.shape[1], dtype)
    # the batch's statistics in eval mode too, unlike the running ones (a trace's eval-mode
    # backward carries such): which of the two eager reads differs by device and path
    _, sm, si = aten.native_batch_norm(x, w, b, rm.clone(), rv.clone(), True, 0.1, 1e-5)
    g = _rand(*x.shape, dtype=dtype, seed=5)
    for mask in MASKS:
        for ww in (w, None):
            args = (g, x, ww, rm, rv, sm, si, training, 1e-5, mask)
            assert_batch_norm_backward_matches(bn_bwd.batch_norm_backward, *args)


def test_cuda_eager_returns_of_the_backward() -> None:
    """What CUDA eager's native_batch_norm_backward returns, as ``_cuda_returns`` reads it
    from ATen (checked here on CPU tensors; ``test_batch_norm_backward`` compares with CUDA
    eager itself on a GPU). 2-D and channels-last inputs whose grad_out suits the
    channels-last kernels get both parameter gradients whatever the mask; eval mode and
    the fused (NCHW) kernel give a contiguous grad_input; the CPU follows the mask."""
    r = bn_bwd._cuda_returns
    x2, g2 = torch.randn(8, 3), torch.randn(8, 3)
    w, m = torch.randn(3), torch.randn(3)
    cl = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
    nchw = torch.randn(2, 3, 4, 5)
    only_dx = [True, False, False]
    assert r(g2, x2, w, (m, m), True, only_dx, False) == ((True, False, False), False)
    assert r(g2, x2, w, (m, m), True, only_dx, True) == ((True, True, True), False)
    # eval, grad_input alone: no reduction, so nothing more; grad_input contiguous
    assert r(g2, x2, w, (m, m), False, only_dx, True) == ((True, False, False), True)
    assert r(g2, x2, w, (m, m), False, [False, True, False], True) == ((False, True, True), True)
    # a strided weight takes the general reduce path, which follows the mask
    ws = torch.randn(6)[::2]
    assert r(g2, x2, ws, (m, m), True, only_dx, True) == ((True, False, False), False)
    # channels-last input with an NCHW grad_out: general reduce path
    assert r(nchw, cl, w, (m, m), True, only_dx, True) == ((True, False, False), False)
    assert r(nchw, cl, w, (m, m), False, [True, True, True], True) == ((True, True, True), True)
    assert r(cl, cl, w, (m, m), True, only_dx, True) == ((True, True, True), False)
    # NCHW: the fused kernel, which follows the mask, contiguous grad_input
    assert r(nchw, nchw, w, (m, m), True, only_dx, True) == ((True, False, False), True)


def test_cuda_eager_statistics_of_the_backward() -> None:
    """Which statistics eager's batch norm backward reads, from ATen's
    ``batch_norm_backward_cuda`` (checked on CPU tensors; ``test_batch_norm_backward``
    compares with eager itself on each device): training the saved; eval on the CPU the
    running; eval on CUDA the running in the fused kernel (NCHW, grad_input and a
    reduction), else the saved unless empty."""
    fused, reads = bn_bwd._cuda_fused, bn_bwd._reads_running
    x2 = torch.randn(8, 3)
    cl = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
    nchw = torch.randn(2, 3, 4, 5)
    all3, only_dx, only_dw = [True, True, True], [True, False, False], [False, True, False]
    assert fused(nchw, nchw, False, all3) and fused(nchw, nchw, True, only_dx)
    assert not fused(nchw, nchw, False, only_dx)  # eval, no parameter gradient: no reduction
    assert not fused(nchw, nchw, True, only_dw)  # no grad_input
    assert not fused(x2, x2, True, all3) and not fused(cl, cl, True, all3)
    # (train, has running, has saved, fused, cuda)
    assert not reads(True, True, True, True, True)
    assert reads(False, True, True, False, False)  # the CPU: running, saved or not
    assert reads(False, True, True, True, True)  # CUDA's fused kernel: running
    assert not reads(False, True, True, False, True)  # CUDA elsewhere: the saved
    assert reads(False, True, False, False, True)  # ... unless they are empty
    assert not reads(False, False, True, True, True)  # no running statistics


def test_batch_norm_backward_grad_layout_differs() -> None:
    x = _rand(2, 3, 4, 5, dtype=torch.float32)
    g = _rand(2, 3, 4, 5, dtype=torch.float32, seed=7).to(memory_format=torch.channels_last)
    _, sm, si = aten.native_batch_norm(x, None, None, None, None, True, 0.1, 1e-5)
    w = _rand(3, dtype=torch.float32, seed=8)  # a weight: CUDA eager's no-weight quirks aside
    args = (g, x, w, None, None, sm, si, True, 1e-5, [True, True, True])
    got = bn_bwd.batch_norm_backward(*args)
    assert got[0].stride() == x.stride()
    assert_matches(got, aten.native_batch_norm_backward, *args)


@pytest.mark.slow
@pytest.mark.skipif(DEVICE != "cpu", reason="checks the interpreter's set-up on the CPU")
def test_kernels_run_when_triton_was_imported_first() -> None:
    """opbench's CPU workers may import Triton before TRITON_INTERPRET is set: the kernels
    must not call triton.language's own @jit helpers (tl.sum, tl.zeros)."""
    code = (
        "import triton.language, os\n"
        "os.environ['TRITON_INTERPRET'] = '1'\n"
        "import torch\n"
        "from opbench.kernels._lib import batch_norm as bn, norm\n"
        "x = torch.randn(4, 3, 5)\n"
        "y = norm.layer_norm(x, [5], None, None, 1e-5)\n"
        "torch.testing.assert_close(y, torch.ops.aten.native_layer_norm(x, [5], None, None, 1e-5))\n"
        "y = bn.batch_norm(x, None, None, None, None, True, 0.1, 1e-5)\n"
        "torch.testing.assert_close(y, torch.ops.aten.native_batch_norm(\n"
        "    x, None, None, None, None, True, 0.1, 1e-5))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=300)


@pytest.mark.slow
@pytest.mark.parametrize("fold_ratio", [1, 10**6], ids=["fold", "finalize"])
@pytest.mark.parametrize("layout", [None, torch.channels_last], ids=["nchw", "channels_last"])
def test_batch_norm_split_statistics(monkeypatch, layout, fold_ratio) -> None:
    """The GPU's tiling at interpreter scale: statistics split over several row ranges,
    merged by the apply kernels themselves (fold) or by a finalize launch; forward and
    backward, training and eval, every output_mask."""
    monkeypatch.setattr(bn, "BN_TILE", 64)  # NCHW: 64-row tiles; channels-last: 16 rows
    monkeypatch.setattr(bn, "BN_TARGET_PROGRAMS", 12)  # 3 channels: 4 row splits
    monkeypatch.setattr(bn, "BN_FOLD_RATIO", fold_ratio)
    monkeypatch.setattr(bn, "_BN_FWD_PLANS", {})  # plans made under the values above
    monkeypatch.setattr(bn_bwd, "_BN_BWD_PLANS", {})
    x = _rand(4, 3, 8, 8, dtype=torch.float32)
    x = x.to(memory_format=layout) if layout is not None else x
    w, b, rm, rv = _bn_params(3, torch.float32)
    g = _rand(*x.shape, dtype=torch.float32, seed=5)
    assert_batch_norm_both_ways(bn.batch_norm, bn_bwd.batch_norm_backward, x, w, b, rm, rv, g)


@pytest.mark.parametrize("fold_ratio", [1, 10**6], ids=["fold", "finalize"])
def test_batch_norm_merges_split_partials_in_tiles(monkeypatch, fold_ratio) -> None:
    """The row kernels' merge of the statistics' partials, several splits a step with a
    short last step: a channels-last input of 3 channels over 256 rows split 6 ways (16-row
    tiles, rows a split 48), the merge reading 4 splits a step (a tile of 16 elements over
    4 channels), in the apply kernels (fold) and the finalize launch; forward and backward
    against eager and float64."""
    monkeypatch.setattr(bn, "BN_TILE", 64)
    monkeypatch.setattr(bn, "BN_TARGET_PROGRAMS", 6)
    monkeypatch.setattr(bn, "BN_FOLD_RATIO", fold_ratio)
    monkeypatch.setattr(bn, "BN_FINALIZE_BLOCK", 4)
    monkeypatch.setattr(bn, "BN_MERGE_TILE", 16)
    monkeypatch.setattr(bn, "_BN_FWD_PLANS", {})
    monkeypatch.setattr(bn_bwd, "_BN_BWD_PLANS", {})
    launchers = ((bn, "_bn_finalize"), (bn, "_bn_apply"), (bn_bwd, "_bn_bwd_finalize"),
                 (bn_bwd, "_bn_bwd_apply"))  # fmt: skip
    steps = launch_constants(monkeypatch, launchers, "BLOCK_S")
    # values far from zero: a merge that cancelled (sum of squares minus a squared sum)
    # would lose the variance
    x = (_rand(4, 3, 8, 8, dtype=torch.float32) + 100.0).to(memory_format=torch.channels_last)
    w, b, rm, rv = _bn_params(3, torch.float32)
    g = _rand(*x.shape, dtype=torch.float32, seed=5)
    assert_batch_norm_both_ways(bn.batch_norm, bn_bwd.batch_norm_backward, x, w, b, rm, rv, g)
    assert 4 in steps, steps
