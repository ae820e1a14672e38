"""The TMA matmul (``matmul_tma.tma_matmul_into``) against eager PyTorch and a float64
reference (Triton's interpreter on the CPU, which reads host-side tensor descriptors):
the traced operand layouts (``A`` stored ``[K, M]``, ``B`` stored ``[N, K]``, a batch-1
``bmm``, ``addmm``'s ``[N]`` bias over a transposed weight) at small sizes, tiles that do
not divide the sizes, several tiles per program (the CPU counts 4 SMs, so the persistent
loop walks more than one work item), split-K, alpha/beta, a column bias, beta == 0 over
a NaN bias; and every case that must return False (leaving ``out`` untouched) so the
caller falls back to the pointer kernel."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from kernel_checks import DEVICE, assert_matches  # noqa: E402

from opbench.kernels._lib import matmul_tma  # noqa: E402
from opbench.kernels._lib.matmul_tma import tma_layout, tma_matmul_into  # noqa: E402

aten = torch.ops.aten
DTYPES = [torch.float16, torch.bfloat16]
#: (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, warps, stages[, splits]): small tiles, so a 72 x 40
#: output is 6 tiles (3 x 2, ragged on both) walked by 4 programs
CONFIGS = [(32, 32, 32, 4, 4, 1), (16, 32, 16, 2, 4, 1), (32, 16, 32, 1, 4, 1, 3)]


def _r(*shape: int, dtype: torch.dtype, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(DEVICE, dtype)


def _operand(rows: int, cols: int, stored_t: bool, dtype: torch.dtype, seed: int) -> torch.Tensor:
    """A ``rows x cols`` matrix, stored as it reads or as its transpose (``x.t()``)."""
    if stored_t:
        return _r(cols, rows, dtype=dtype, seed=seed).t()
    return _r(rows, cols, dtype=dtype, seed=seed)


def _mm(a: torch.Tensor, b: torch.Tensor, cfg: tuple[int, ...] | None = None, **kw) -> torch.Tensor:
    out = torch.full((a.shape[0], b.shape[1]), 7.0, dtype=a.dtype, device=a.device)
    assert tma_matmul_into(out.unsqueeze(0), a.unsqueeze(0), b.unsqueeze(0), config=cfg, **kw)
    return out


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: "x".join(map(str, c)))
@pytest.mark.parametrize("a_t", [False, True], ids=["A", "At"])
@pytest.mark.parametrize("b_t", [False, True], ids=["B", "Bt"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_mm_layouts(a_t: bool, b_t: bool, cfg: tuple[int, ...], dtype: torch.dtype) -> None:
    """Both operands as they lie or transposed (traced: ``[768, 2048]`` stored
    transposed times ``[2048, 768]``; ``x @ W.t()``), tiles that do not divide M or N."""
    a = _operand(72, 48, a_t, dtype, seed=1)
    b = _operand(48, 40, b_t, dtype, seed=2)
    assert_matches(_mm(a, b, cfg), aten.mm, a, b)


@pytest.mark.parametrize("N", [64, 30])
def test_long_k_split_and_persistent(N: int) -> None:
    """K of 200 (7 blocks of 32, the last ragged) split 3 ways: 12 tiles x 3 splits over 4
    programs; the splits' fp32 partials (through a 3-D descriptor, or pointers where N is
    not a multiple of 4) summed with alpha and the bias after."""
    a = _operand(96, 200, True, torch.float16, seed=3)
    b = _operand(200, N, N % 8 != 0, torch.float16, seed=4)
    bias = _r(N, dtype=torch.float16, seed=5)
    out = torch.empty(96, N, dtype=torch.float16, device=DEVICE)
    cfg = (32, 16, 32, 2, 4, 1, 3)
    assert tma_matmul_into(out[None], a[None], b[None], bias, 0.5, 2.0, cfg)
    assert_matches(out, aten.addmm, bias, a, b, beta=2.0, alpha=0.5)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_bmm_batch_one_transposed(dtype: torch.dtype) -> None:
    """Traced: ``bmm`` of ``[1, 1024, 2048]`` with strides ``(2097152, 1, 1024)``."""
    a = _r(1, 64, 56, dtype=dtype, seed=6).transpose(1, 2)  # [1, 56, 64], M contiguous
    b = _r(1, 64, 40, dtype=dtype, seed=7)
    out = torch.empty(1, 56, 40, dtype=dtype, device=DEVICE)
    assert tma_matmul_into(out, a, b)
    assert_matches(out, aten.bmm, a, b)


@pytest.mark.parametrize("cfg", CONFIGS[::2], ids=lambda c: "x".join(map(str, c)))
@pytest.mark.parametrize("a_t", [False, True], ids=["A", "At"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_addmm_row_bias_transposed_weight(
    a_t: bool, cfg: tuple[int, ...], dtype: torch.dtype
) -> None:
    """Traced: ``addmm(bias[N], x, W.t())`` with ``W`` ``[N, K]`` (stride ``(1, K)`` as
    ``[K, N]``), alpha and beta other than 1."""
    a = _operand(40, 64, a_t, dtype, seed=8)
    w = _r(48, 64, dtype=dtype, seed=9)
    bias = _r(48, dtype=dtype, seed=10)
    out = torch.empty(40, 48, dtype=dtype, device=DEVICE)
    assert tma_matmul_into(out[None], a[None], w.t()[None], bias.expand(1, 40, 48), 1.5, -0.5, cfg)
    assert_matches(out, aten.addmm, bias, a, w.t(), beta=-0.5, alpha=1.5)


def test_column_bias_and_beta_zero_ignores_nan() -> None:
    a = _operand(40, 32, False, torch.float16, seed=11)
    b = _operand(32, 24, True, torch.float16, seed=12)
    col = _r(40, 1, dtype=torch.float16, seed=13)
    out = torch.empty(40, 24, dtype=torch.float16, device=DEVICE)
    assert tma_matmul_into(out[None], a[None], b[None], col.expand(1, 40, 24), 1.0, 3.0)
    assert_matches(out, aten.addmm, col, a, b, beta=3.0)
    nan = torch.full((24,), float("nan"), dtype=torch.float16, device=DEVICE)
    assert tma_matmul_into(out[None], a[None], b[None], nan, 2.0, 0.0)
    assert_matches(out, aten.addmm, nan, a, b, beta=0.0, alpha=2.0)


@pytest.mark.parametrize(
    "M,K,N,a_t,b_t",
    [(1, 32, 40, False, False), (37, 48, 24, False, True), (40, 13, 16, True, False),
     (24, 40, 13, False, True), (5, 8, 3, False, True), (8, 16, 1, True, False)],
)  # fmt: skip
def test_odd_sizes(M: int, K: int, N: int, a_t: bool, b_t: bool) -> None:
    """One row; odd M over a K-contiguous A; odd K under transposed A; odd N (its output
    rows are 26 bytes apart: stored through pointers, not a descriptor)."""
    a = _operand(M, K, a_t, torch.float16, seed=14)
    b = _operand(K, N, b_t, torch.float16, seed=15)
    assert_matches(_mm(a, b), aten.mm, a, b)


def test_repeat_call_same_plan_new_data() -> None:
    """A second call of one signature (a cached plan) reads the new operands."""
    for seed in (16, 17):
        a = _operand(40, 32, True, torch.bfloat16, seed=seed)
        b = _operand(32, 48, False, torch.bfloat16, seed=seed + 10)
        assert_matches(_mm(a, b), aten.mm, a, b)


def _declined(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor, bias=None, cfg=None) -> None:
    before = out.clone()
    assert tma_matmul_into(out, a, b, bias, config=cfg) is False
    assert torch.equal(out, before) or torch.isnan(before).all()


def test_fallback_cases_return_false() -> None:
    h = torch.float16
    a, b = _r(1, 32, 48, dtype=h, seed=20), _r(1, 48, 40, dtype=h, seed=21)
    out = torch.zeros(1, 32, 40, dtype=h, device=DEVICE)
    _declined(out.float(), a.float(), b.float())  # float32: the pointer kernel's
    _declined(out, a, b.to(torch.bfloat16))  # mixed dtypes
    _declined(torch.zeros(2, 32, 40, dtype=h, device=DEVICE), a.expand(2, 32, 48),
              b.expand(2, 48, 40))  # a batch of two  # fmt: skip
    odd = _r(1, 32, 52, dtype=h, seed=22)[:, :, 1:49]  # base 2 bytes off 16
    _declined(out, odd, b)
    _declined(out, _r(1, 32, 12, dtype=h, seed=23), _r(1, 12, 40, dtype=h, seed=24))  # 24-byte rows
    _declined(out, _r(1, 32, 96, dtype=h, seed=25)[:, :, ::2], b)  # no unit stride
    _declined(out, a, b, _r(1, 32, 40, dtype=h, seed=26))  # a full bias matrix
    _declined(out, a[:, :, :0], b[:, :0])  # K == 0: the pointer kernel writes beta * bias


def test_tma_layout() -> None:
    h = torch.float16
    assert tma_layout(torch.empty(8, 16, dtype=h)) == 0
    assert tma_layout(torch.empty(16, 8, dtype=h).t()) == 1
    assert tma_layout(torch.empty(8, 12, dtype=h)) is None  # 24-byte rows
    assert tma_layout(torch.empty(8, 32, dtype=h)[:, ::2]) is None
    assert tma_layout(torch.empty(1, 12, dtype=h)) == 0  # one row: its stride is never used
    assert tma_layout(torch.empty(12, 1, dtype=h)) == 1


def test_default_config_is_wgmma_sized() -> None:
    assert matmul_tma.DEFAULT_CONFIG[:3] == (128, 128, 64)


def _spy_tma(monkeypatch) -> list[bool]:
    """What each ``tma_matmul_into`` call returned (matmul_into imports it per call)."""
    got: list[bool] = []
    real = matmul_tma.tma_matmul_into
    monkeypatch.setattr(matmul_tma, "tma_matmul_into",
                        lambda *a, **k: (got.append(real(*a, **k)), got[-1])[1])  # fmt: skip
    return got


def test_matmul_into_sends_table_products_to_tma(monkeypatch) -> None:
    """``matmul_into`` without a configuration runs a product of ``TMA_SHAPE_CONFIGS`` on
    the TMA kernel (the interpreter's own plans are off for the lookup, as on a GPU);
    an ``addmm``-style ``[N]`` bias over a transposed weight, as traced."""
    from opbench.kernels._lib import matmul

    monkeypatch.setattr(matmul, "_INTERPRETING", False)
    monkeypatch.setattr(matmul, "TMA_SHAPE_CONFIGS", {(2, 1, 72, 40, 48): CONFIGS[0]})
    used = _spy_tma(monkeypatch)
    a, w, bias = (_r(72, 48, dtype=torch.float16, seed=1), _r(40, 48, dtype=torch.float16, seed=2),
                  _r(40, dtype=torch.float16, seed=3))  # fmt: skip
    out = torch.empty(1, 72, 40, dtype=torch.float16, device=DEVICE)
    matmul.matmul_into(out, a.unsqueeze(0), w.t().unsqueeze(0), bias.expand(1, 72, 40))
    assert used == [True]
    assert_matches(out[0], aten.addmm.default, bias, a, w.t())


def test_matmul_into_falls_back_where_tma_declines(monkeypatch) -> None:
    """A table product TMA declines (float32) runs on the pointer kernel, same result."""
    from opbench.kernels._lib import matmul, matmul_pointer

    monkeypatch.setattr(matmul, "_INTERPRETING", False)
    monkeypatch.setattr(matmul, "TMA_SHAPE_CONFIGS", {(4, 1, 24, 20, 16): CONFIGS[0]})
    monkeypatch.setattr(matmul, "config_for", lambda *a, **k: matmul_pointer.INTERP_CONFIG)
    used = _spy_tma(monkeypatch)
    a, b = _r(24, 16, dtype=torch.float32, seed=4), _r(16, 20, dtype=torch.float32, seed=5)
    out = torch.empty(1, 24, 20, dtype=torch.float32, device=DEVICE)
    matmul.matmul_into(out, a.unsqueeze(0), b.unsqueeze(0))
    assert used == [False]
    assert_matches(out[0], aten.mm.default, a, b)
