"""Float32 -> bfloat16 under Triton's interpreter rounds to nearest even, bit for bit as
PyTorch (``opbench.instrument.interpreter_rounding``): the conversion itself against
``torch.Tensor.to`` on random, tie and edge values, a kernel's stores, and the model the
interpreter's truncation broke (the encoder under bfloat16 autocast)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

pytest.importorskip("triton")

from kernel_checks import DEVICE  # noqa: E402

from opbench.instrument import interpreter_rounding as ir  # noqa: E402
from opbench.kernels._lib import copy as cp  # noqa: E402

cpu_only = pytest.mark.skipif(DEVICE != "cpu", reason="the interpreter's rounding, on the CPU")


def _values() -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    random = torch.randn(20000, generator=g) * torch.logspace(-30, 30, 20000)
    # exact ties (the 16 bits dropped are 0x8000), with even and odd kept halves
    ties = (torch.arange(1, 2001, dtype=torch.int32) << 16 | 0x8000).view(torch.float32)
    edges = torch.tensor([0.0, -0.0, math.inf, -math.inf, 3.4e38, -3.4e38, 3.3961776e38,
                          1e-40, -1e-40, 1.17549435e-38, 1.0, -1.0])  # fmt: skip
    return torch.cat([random, ties, -ties, edges])


def test_round_to_bf16_bits_is_pytorchs_rounding() -> None:
    x = _values()
    got = ir.round_to_bf16_bits(x.numpy())
    want = x.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    assert got.dtype == np.uint16 and np.array_equal(got, want)
    nan = ir.round_to_bf16_bits(np.array([math.nan, -math.nan], dtype=np.float32))
    assert np.isnan(torch.from_numpy(nan.view(np.int16)).view(torch.bfloat16).float()).all()


@cpu_only
def test_a_kernels_bfloat16_stores_round_as_eager() -> None:
    """``copy_`` float32 -> bfloat16 through the interpreter: every element as eager's
    (the truncating interpreter put ~27% one unit off); installing again changes nothing."""
    x = _values()
    out = cp.copy_(torch.empty(x.shape, dtype=torch.bfloat16), x)
    assert torch.equal(out.view(torch.int16), x.to(torch.bfloat16).view(torch.int16))
    assert ir.install() is False  # tests/kernels/conftest.py installed it, as the harness does


@cpu_only
def test_the_encoder_trains_on_the_backend_under_bfloat16_autocast() -> None:
    """The reference backend's encoder step under ``autocast="bf16"``: truncating
    stores failed its weight gradient by 2.5x its bound (2026-11-30); rounded, it passes."""
    pytest.importorskip("transformers")
    from opbench.models.check import check_model

    r = check_model("encoder", "triton", "cpu", autocast="bf16")
    assert r.error is None, r.error
    assert r.ok and r.output_dtype == "torch.float32" and "copy_.default" in r.served_ops
