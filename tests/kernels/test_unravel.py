"""The index unravelling both strided kernels share (:func:`pointwise_kernels.unravel`):
the strided pointwise kernel and cat's per-input copy (``copy._cat_part``) once carried
their own copies of it (``idx - r * d3`` in one, ``idx % d3`` in the other). Checked
directly against Python's ``divmod`` for every merged rank and both index widths, and
through both kernels on the same strided inputs (copies, so results must be equal)."""

from __future__ import annotations

import pytest
import torch
from kernel_checks import DEVICE

triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402

from opbench.kernels._lib import copy as kcopy  # noqa: E402
from opbench.kernels._lib.pointwise_kernels import unravel  # noqa: E402


@triton.jit
def _unravel_kernel(
    out_ptr, n: tl.int64, d1: tl.int64, d2: tl.int64, d3: tl.int64,
    IDX: tl.constexpr, NDIM: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    idx = tl.program_id(0).to(IDX) * BLOCK + tl.arange(0, BLOCK)
    mask = idx < n.to(IDX)
    i0, i1, i2, i3 = unravel(idx, d1, d2, d3, IDX, NDIM)
    # the leading indices are the constant 0 below NDIM: stored through a zero tensor
    zero = idx * 0
    tl.store(out_ptr + idx * 4 + 0, (zero + i0).to(tl.int64), mask=mask)
    tl.store(out_ptr + idx * 4 + 1, (zero + i1).to(tl.int64), mask=mask)
    tl.store(out_ptr + idx * 4 + 2, (zero + i2).to(tl.int64), mask=mask)
    tl.store(out_ptr + idx * 4 + 3, (zero + i3).to(tl.int64), mask=mask)


def _expected(n: int, dims: tuple[int, int, int, int], ndim: int) -> list[list[int]]:
    """Each flat index's position in ``dims``, its leading ``4 - ndim`` entries 0."""
    out = []
    for idx in range(n):
        pos = [0, 0, 0, 0]
        rest = idx
        for k in range(3, 3 - ndim, -1):
            if k == 4 - ndim:  # the outermost real dim takes what is left
                pos[k] = rest
            else:
                rest, pos[k] = divmod(rest, dims[k])
        out.append(pos)
    return out


@pytest.mark.parametrize("idx_type", ["int32", "int64"])
@pytest.mark.parametrize("ndim", [1, 2, 3, 4])
def test_unravel_matches_divmod(ndim: int, idx_type: str) -> None:
    dims = (3, 2, 5, 7)  # d0 is never read: the outermost index is what is left
    n = 3 * 2 * 5 * 7
    out = torch.full((n, 4), -1, dtype=torch.int64, device=DEVICE)
    _unravel_kernel[(triton.cdiv(n, 64),)](
        out, n, dims[1], dims[2], dims[3],
        IDX=getattr(tl, idx_type), NDIM=ndim, BLOCK=64,
    )  # fmt: skip
    assert out.cpu().tolist() == _expected(n, dims, ndim)


def _strided_inputs() -> list[torch.Tensor]:
    """Views whose dims cannot be merged: 1 to 4 merged dims, f32 and f16, and rows of
    16 contiguous f16 elements (cat moves them as vectors of 8: its ``UNIT`` path)."""
    g = torch.Generator().manual_seed(0)
    base = torch.randn((4, 6, 5, 3), generator=g).to(DEVICE)
    rows = torch.randn((4, 6, 16), generator=g).to(DEVICE, torch.float16)
    return [
        base[:, 0, 0, 0],  # 1 dim, stride 90
        base[:, :, 0, 0].t(),  # 2 dims, transposed
        base.permute(1, 0, 2, 3)[:, :, 1:, 1],  # 3 dims
        base.permute(2, 0, 3, 1),  # 4 dims, every one out of order
        base.to(torch.float16).permute(3, 1, 0, 2)[:, 1:],  # 4 dims, f16, sliced
        rows.transpose(0, 1),  # 3 dims, contiguous rows
    ]


@pytest.mark.parametrize("case", range(6))
def test_pointwise_and_cat_read_strided_inputs_alike(case: int) -> None:
    x = _strided_inputs()[case]
    assert not x.is_contiguous()
    by_pointwise = kcopy.clone(x, memory_format=torch.contiguous_format)  # strided kernel
    by_cat = kcopy.cat([x], 0)  # cat's per-input copy
    assert torch.equal(by_pointwise, x.contiguous())
    assert torch.equal(by_cat, x.contiguous())
    # and each input of a cat of several strided parts lands where torch.cat puts it
    assert torch.equal(kcopy.cat([x, x.flip(0)], 0), torch.cat([x, x.flip(0)], 0))
