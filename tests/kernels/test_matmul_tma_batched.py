"""The batched TMA matmul (``matmul_tma_batched.tma_bmm_into``) against eager PyTorch and
a float64 reference (Triton's interpreter here; ``OPBENCH_KERNEL_DEVICE=cuda`` compiled):
each operand stored either way, ragged sizes, a bias row or column for the whole batch,
alpha and beta, NaN and Inf in one matrix that must not reach another, and the calls it
declines."""

from __future__ import annotations

import math

import pytest
import torch

pytest.importorskip("triton")

from kernel_checks import DEVICE, assert_matches  # noqa: E402

from opbench.kernels._lib.matmul_tma_batched import tma_bmm_into  # noqa: E402

CFG = (32, 32, 32, 8, 4, 2)


def _operand(batch: int, rows: int, cols: int, transposed: bool, seed: int,
             dtype: torch.dtype = torch.float16) -> torch.Tensor:  # fmt: skip
    g = torch.Generator().manual_seed(seed)
    if transposed:
        return torch.randn(batch, cols, rows, generator=g).to(DEVICE, dtype).transpose(1, 2)
    return torch.randn(batch, rows, cols, generator=g).to(DEVICE, dtype)


def _out(batch: int, M: int, N: int) -> torch.Tensor:
    return torch.full((batch, M, N), math.nan, dtype=torch.float16, device=DEVICE)


@pytest.mark.parametrize("a_t,b_t", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("M,N,K", [(40, 48, 64), (72, 40, 56)])
def test_bmm_layouts_and_ragged_sizes(a_t: bool, b_t: bool, M: int, N: int, K: int) -> None:
    a, b = _operand(3, M, K, a_t, 1), _operand(3, K, N, b_t, 2)
    out = _out(3, M, N)
    assert tma_bmm_into(out, a, b, None, 1.0, 1.0, CFG)
    assert_matches(out, torch.bmm, a, b)


@pytest.mark.parametrize("bias_kind", ["row", "column"])
def test_baddbmm_vector_bias_alpha_beta(bias_kind: str) -> None:
    a, b = _operand(2, 40, 48, False, 3), _operand(2, 48, 56, True, 4)
    shape = (56,) if bias_kind == "row" else (40, 1)
    bias = _operand(1, 1, math.prod(shape), False, 5)[0, 0].reshape(shape)
    out = _out(2, 40, 56)
    assert tma_bmm_into(out, a, b, bias.expand(2, 40, 56), 0.5, -2.0, CFG)
    assert_matches(out, lambda x, p, q: torch.baddbmm(x, p, q, alpha=0.5, beta=-2.0),
                   bias.expand(2, 40, 56), a, b)  # fmt: skip


def test_nan_and_inf_stay_in_their_matrix() -> None:
    """K = 40 is not a multiple of the 32-wide K box: the last box reads past K, which
    must be zeros from matrix 0's own bounds, never matrix 1's NaN and Inf."""
    a, b = _operand(2, 40, 40, False, 6), _operand(2, 40, 48, False, 7)
    a[1, :, 0] = math.nan
    b[1, 0, :] = math.inf
    out = _out(2, 40, 48)
    assert tma_bmm_into(out, a, b, None, 1.0, 1.0, CFG)
    assert torch.isfinite(out[0]).all()
    assert_matches(out, torch.bmm, a, b)


def test_declines_what_it_cannot_describe() -> None:
    a, b = _operand(2, 32, 32, False, 8), _operand(2, 32, 32, False, 9)
    out = _out(2, 32, 32)
    assert tma_bmm_into(out[:1], a[:1], b[:1], None, 1.0, 1.0, CFG) is False  # batch of one
    assert tma_bmm_into(out, a[:1].expand(2, 32, 32), b, None, 1.0, 1.0, CFG) is False
    f32 = torch.empty(2, 32, 32, device=DEVICE)
    assert tma_bmm_into(f32, a.float(), b.float(), None, 1.0, 1.0, CFG) is False
    odd = _operand(2, 32, 36, False, 10)[:, :, :30]  # 72-byte rows: no 16-byte stride
    assert tma_bmm_into(_out(2, 32, 32), odd, _operand(2, 30, 32, False, 11), None, 1.0, 1.0,
                        CFG) is False  # fmt: skip
    full = _operand(2, 32, 32, False, 12)  # a bias matrix per batch entry
    assert tma_bmm_into(out, a, b, full, 1.0, 1.0, CFG) is False
    assert torch.isnan(out).all()  # nothing was written
