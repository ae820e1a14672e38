"""The kernels that reproduce CUDA eager where it differs from the CPU, run here on CPU
tensors under Triton's interpreter against a float64 reference written from ATen's CUDA
functors (a GPU run of ``test_pointwise_more`` compares them with CUDA eager itself):

* ``hardswish_backward`` and ``elu_backward``: CUDA's functors test ``x <= -3``/``x < 3``
  and ``x <= 0``, the CPU's vector paths ``x >= 3`` and ``x > 0``, so a NaN input takes
  the other branch (the gradient passes, not NaN);
* ``clamp`` with one bound: CUDA's ``::max``/``::min`` are fmaxf/fminf, which ignore a NaN
  bound (the CPU's give NaN);
* ``pow.Tensor_Scalar``: CUDA special-cases exponents 0.5, -0.5 and -1 for every float
  dtype, computes 2, 3 and -2 in the dtype's own arithmetic (at::Half rounds each
  product) and otherwise calls powf with the exponent rounded to the dtype.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from kernel_checks import DEVICE  # noqa: E402

from opbench.kernels._lib import activations as act  # noqa: E402
from opbench.kernels._lib import math_ops as mo  # noqa: E402
from opbench.kernels._lib.pointwise import elementwise  # noqa: E402

pytestmark = pytest.mark.skipif(DEVICE != "cpu", reason="CPU tensors through the CUDA rules")

INF, NAN = float("inf"), float("nan")
X = torch.tensor(
    [NAN, INF, -INF, 0.0, -0.0, -3.0, 3.0, -2.999, 2.999, 1.5, -1.5, -1e4, 40.0, 0.25, -7.0]
)


def _close(got: torch.Tensor, want: torch.Tensor) -> None:
    assert got.dtype == want.dtype
    torch.testing.assert_close(got, want, equal_nan=True, rtol=2e-6, atol=1e-6)


def test_hardswish_backward_cuda_rule() -> None:
    g = torch.linspace(-2, 2, X.numel())
    got = elementwise(act._hardswish_backward_cuda, [g, X], torch.float32)
    x, gd = X.double(), g.double()
    want = torch.where(x <= -3, 0.0, torch.where(x < 3, gd * (x / 3 + 0.5), gd))
    _close(got, want.float())
    assert got[0] == g[0]  # NaN input: the gradient passes (the CPU gives NaN)


@pytest.mark.parametrize("is_result", [False, True])
def test_elu_backward_cuda_rule(is_result: bool) -> None:
    g = torch.linspace(-2, 2, X.numel())
    alpha, scale, input_scale = 1.5, 1.05, 0.7
    fn = act._elu_backward_result_cuda if is_result else act._elu_backward_cuda
    got = elementwise(fn, [g, X, input_scale], torch.float32, p0=alpha * scale, p1=scale)
    x, gd = X.double(), g.double()
    neg = gd * input_scale * (x + alpha * scale) if is_result else (
        gd * input_scale * alpha * scale * torch.exp(x * input_scale)
    )  # fmt: skip
    want = torch.where(x <= 0, neg, gd * scale)
    _close(got, want.float())
    assert got[0] == g[0] * scale


def test_clamp_one_nan_bound_cuda_rule() -> None:
    _close(elementwise(mo._clamp_min_cuda, [X, NAN], torch.float32), X)
    _close(elementwise(mo._clamp_max_cuda, [X, NAN], torch.float32), X)
    want = torch.where(X.isnan(), X, X.clamp(min=-1.5))
    _close(elementwise(mo._clamp_min_cuda, [X, -1.5], torch.float32), want)


def _round(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return t.to(dtype).double()


@pytest.mark.parametrize("e", [3.0, -2.0, 2.0, 0.5, -0.5, -1.0, 1.7, -2.5, 4.0])
def test_pow_cuda_rule_float16(e: float) -> None:
    """float16 only: the interpreter rounds bfloat16 casts wrongly (FACTS.md)."""
    x = torch.tensor([0.1, 0.3, 1.7, 2.9, 11.3, 37.0, -1.3, -4.1, 0.0, -0.0, INF, NAN])
    x = x.to(torch.float16)
    fn, p0, p1, compute = mo._pow_float_fn(torch.float16, e, cuda=True)
    got = elementwise(fn, [x], torch.float16, p0=p0, p1=p1, compute_dtype=compute)
    b = x.double()
    if e == 3.0:
        want = _round(_round(b * b, torch.float16) * b, torch.float16)
    elif e == -2.0:
        want = _round(1.0 / _round(b * b, torch.float16), torch.float16)
    elif e == -0.5:
        want = _round(1.0 / b.sqrt(), torch.float16)
    else:  # powf with the exponent rounded to float16
        want = _round(b.pow(float(torch.tensor(e, dtype=torch.float16))), torch.float16)
    torch.testing.assert_close(got, want.half(), equal_nan=True, rtol=1e-3, atol=0)
    if e in (3.0, -2.0):  # each product rounded: exactly CUDA's at::Half arithmetic
        assert torch.equal(got.isnan(), want.isnan())
        finite = ~want.isnan()
        assert torch.equal(got[finite], want.half()[finite])


def test_pow_cuda_rule_picks_eager_cuda_kernels() -> None:
    f = mo._pow_float_fn
    assert f(torch.float16, 0.5, cuda=True)[0] is mo._sqrt  # the CPU: exp/log for f16
    assert f(torch.float16, 0.5)[0] is mo._pow_float
    assert f(torch.bfloat16, 3.0, cuda=True)[0] is mo._cube_bf16
    assert f(torch.float32, 3.0, cuda=True)[0] is mo._cube
    fn, p0, _, compute = f(torch.float32, 1.7, cuda=True)
    assert fn is mo._pow_cuda and compute is None  # powf in float32, not float64
    # the exponent as given: the kernel rounds it to the dtype (as the C++ gate, which
    # passes it as it is, launches it)
    assert p0 == 1.7
    assert f(torch.bfloat16, 1.7, cuda=True)[0] is mo._pow_cuda_bf16
    assert f(torch.float16, 1.7, cuda=True)[0] is mo._pow_cuda_f16
