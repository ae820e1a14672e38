"""The second part of the pointwise family against eager PyTorch on CPU (Triton's
interpreter): hardsigmoid, hardswish, leaky_relu, elu and their backward ops, exp,
sqrt, rsqrt, reciprocal, pow.Tensor_Scalar, clamp, masked_fill, minimum and maximum, in
f32, f16 and bf16 on contiguous, transposed, broadcast, 0-dim and empty inputs, special
values, integer inputs, and the in-place and ``out=`` entry points, checked as the judge
checks them (against eager and a float64 reference)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from kernel_checks import DEVICE, assert_matches, stable_seed  # noqa: E402

from opbench.kernels._lib import activations as act  # noqa: E402
from opbench.kernels._lib import math_ops as mo  # noqa: E402

aten = torch.ops.aten
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
LAYOUTS = ["contiguous", "transposed", "broadcast", "zero_dim", "empty", "sliced5d"]
INF, NAN = float("inf"), float("nan")


def _inputs(layout: str, dtype: torch.dtype, n: int = 2) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(stable_seed(layout, str(dtype), "more"))

    def r(*shape: int) -> torch.Tensor:
        return (torch.randn(*shape, generator=g) * 3).to(DEVICE, dtype)

    if layout == "contiguous":
        return [r(37, 19) for _ in range(n)]
    if layout == "transposed":
        return [r(19, 37).t() for _ in range(n)]
    if layout == "broadcast":
        return [r(5, 1, 7), r(3, 1)][:n] if n == 2 else [r(6, 1, 7)]
    if layout == "zero_dim":
        return (
            [r(4, 3), torch.tensor(-1.25, dtype=dtype, device=DEVICE)][:n]
            if n == 2
            else [r(1).reshape(())]
        )
    if layout == "empty":
        return [r(0, 3) for _ in range(n)]
    if layout == "sliced5d":
        return [r(2, 3, 4, 5, 8)[..., ::2].permute(4, 2, 0, 3, 1) for _ in range(n)]
    raise AssertionError(layout)


def _pow(e: float):  # noqa: ANN202
    return (lambda x: mo.pow_tensor_scalar(x, e), lambda x: aten.pow.Tensor_Scalar(x, e))


UNARY = {
    "hardsigmoid": (act.hardsigmoid, aten.hardsigmoid),
    "hardswish": (act.hardswish, aten.hardswish),
    "leaky_relu": (act.leaky_relu, aten.leaky_relu),
    "leaky_relu_0.2": (lambda x: act.leaky_relu(x, 0.2), lambda x: aten.leaky_relu(x, 0.2)),
    "elu": (act.elu, aten.elu),
    "elu_scaled": (
        lambda x: act.elu(x, 1.5, 1.05, 0.7),
        lambda x: aten.elu(x, 1.5, 1.05, 0.7),
    ),
    "exp": (mo.exp, aten.exp),
    "sqrt": (mo.sqrt, aten.sqrt),
    "rsqrt": (mo.rsqrt, aten.rsqrt),
    "reciprocal": (mo.reciprocal, aten.reciprocal),
    **{f"pow_{e}": _pow(e) for e in (0, 1, 2, 3, 4, -1, -2, -3, 0.5, -0.5, 1.7, -2.5, 3.0)},
    "clamp": (lambda x: mo.clamp(x, -1.5, 2.0), lambda x: aten.clamp(x, -1.5, 2.0)),
    "clamp_min": (lambda x: mo.clamp(x, 0.5), lambda x: aten.clamp(x, 0.5)),
    "clamp_max": (lambda x: mo.clamp(x, None, 0.5), lambda x: aten.clamp(x, None, 0.5)),
    "clamp_crossed": (lambda x: mo.clamp(x, 2.0, -1.0), lambda x: aten.clamp(x, 2.0, -1.0)),
}

BINARY = {
    "hardsigmoid_backward": (act.hardsigmoid_backward, aten.hardsigmoid_backward),
    "hardswish_backward": (act.hardswish_backward, aten.hardswish_backward),
    "leaky_relu_backward": (
        lambda g, x: act.leaky_relu_backward(g, x, 0.2, False),
        lambda g, x: aten.leaky_relu_backward(g, x, 0.2, False),
    ),
    "leaky_relu_backward_result": (
        lambda g, x: act.leaky_relu_backward(g, x, 0.2, True),
        lambda g, x: aten.leaky_relu_backward(g, x, 0.2, True),
    ),
    "elu_backward": (
        lambda g, x: act.elu_backward(g, 1.5, 1.05, 0.7, False, x),
        lambda g, x: aten.elu_backward(g, 1.5, 1.05, 0.7, False, x),
    ),
    "elu_backward_result": (
        lambda g, x: act.elu_backward(g, 1.5, 1.05, 0.7, True, x),
        lambda g, x: aten.elu_backward(g, 1.5, 1.05, 0.7, True, x),
    ),
    "minimum": (mo.minimum, aten.minimum),
    "maximum": (mo.maximum, aten.maximum),
}
#: ops whose two operands broadcast (the backward ops take same-shaped tensors)
BROADCASTING = {"minimum", "maximum"}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name: str, layout: str, dtype: torch.dtype) -> None:
    ours, ref = UNARY[name]
    (a,) = _inputs(layout, dtype, n=1)
    assert_matches(ours(a), ref, a)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary(name: str, layout: str, dtype: torch.dtype) -> None:
    ours, ref = BINARY[name]
    a, b = _inputs(layout, dtype)
    if name not in BROADCASTING:
        a, b = torch.broadcast_tensors(a, b)
    assert_matches(ours(a, b), ref, a, b)


#: special values, repeated to 64 elements so that eager takes its vectorised path for
#: all of them (its scalar tail treats NaN differently in some backward ops)
SPECIAL = torch.tensor(
    [NAN, INF, -INF, 0.0, -0.0, 1e-30, -1e-30, -1e4, 88.0, 3.0, -3.0, 1.0, -1.0, 0.5, -2.5, 6.0],
    device=DEVICE,
).repeat(4)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_special_values(name: str, dtype: torch.dtype) -> None:
    ours, ref = UNARY[name]
    x = SPECIAL.to(dtype)
    assert_matches(ours(x), ref, x)


def test_rsqrt_keeps_denormals() -> None:
    """A float32 or bfloat16 denormal's rsqrt is finite in eager (1e20 for 1e-40): on the
    GPU the kernel takes CUDA's ``rsqrtf`` as PTX, not libdevice's, which Triton links
    flushing denormals (inf). bfloat16 on the GPU only: Triton's interpreter widens a
    bfloat16 denormal wrongly (1e-45 to 0; 5e-39's rsqrt came out 1.1e19, not 1.4e19)."""
    x = torch.tensor([1e-40, -1e-40, 5e-39, 1e-45, 1e-30, 0.0, -0.0], device=DEVICE).repeat(4)
    for dtype in (torch.float32,) + ((torch.bfloat16,) if DEVICE != "cpu" else ()):
        xd = x.to(dtype)
        assert_matches(mo.rsqrt(xd), aten.rsqrt, xd)
        assert_matches(mo.pow_tensor_scalar(xd, -0.5), aten.pow.Tensor_Scalar, xd, -0.5)


@pytest.mark.parametrize("e", [INF, -INF, NAN, 1e10, -7.0, 0.3])
def test_pow_special_exponents(e: float) -> None:
    assert_matches(mo.pow_tensor_scalar(SPECIAL, e), aten.pow.Tensor_Scalar, SPECIAL, e)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_special_values(name: str) -> None:
    ours, ref = BINARY[name]
    x = SPECIAL
    g = torch.linspace(-2, 2, x.numel(), device=DEVICE)
    assert_matches(ours(g, x), ref, g, x)
    assert_matches(ours(x, g), ref, x, g)


def _same(got: torch.Tensor, want: torch.Tensor) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got, want, equal_nan=True, rtol=1.3e-6, atol=1e-5)


@pytest.mark.parametrize("name", ["exp", "sqrt", "rsqrt", "reciprocal"])
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.bool], ids=str)
def test_math_of_integers_gives_floats(name: str, dtype: torch.dtype) -> None:
    x = torch.arange(-5, 11, device=DEVICE).to(dtype)
    _same(getattr(mo, name)(x), getattr(aten, name)(x))
    with pytest.raises(RuntimeError, match="can't be cast"):
        getattr(mo, name + "_")(x.clone())


@pytest.mark.parametrize("e", [0, 1, 2, 3, 7, 13, 40])
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8, torch.uint8], ids=str)
def test_pow_integers_exact(e: int, dtype: torch.dtype) -> None:
    x = torch.arange(-9, 12, device=DEVICE).to(dtype)
    got, want = mo.pow_tensor_scalar(x, e), aten.pow.Tensor_Scalar(x, e)
    assert got.dtype == want.dtype and torch.equal(got, want)


def test_pow_mixed_types_and_errors() -> None:
    i = torch.arange(-4, 9, device=DEVICE)
    _same(mo.pow_tensor_scalar(i, 0.5), aten.pow.Tensor_Scalar(i, 0.5))
    _same(mo.pow_tensor_scalar(i, 2.0), aten.pow.Tensor_Scalar(i, 2.0))
    b = torch.tensor([True, False], device=DEVICE)
    _same(mo.pow_tensor_scalar(b, 2), aten.pow.Tensor_Scalar(b, 2))
    with pytest.raises(RuntimeError, match="negative integer powers"):
        mo.pow_tensor_scalar(i, -2)
    with pytest.raises(RuntimeError, match="can't be cast"):
        mo.pow_scalar_(i.clone(), 0.5)


def test_clamp_integers_promotion_and_errors() -> None:
    i = torch.arange(-6, 7, dtype=torch.int32, device=DEVICE)
    _same(mo.clamp(i, -2, 3), aten.clamp(i, -2, 3))
    _same(mo.clamp(i, -2.5), aten.clamp(i, -2.5))  # promotes to float
    _same(mo.clamp(i, None, 4), aten.clamp(i, None, 4))
    x = torch.randn(9).to(DEVICE)
    _same(mo.clamp(x, NAN), aten.clamp(x, NAN))
    _same(mo.clamp(x, None, NAN), aten.clamp(x, None, NAN))
    with pytest.raises(RuntimeError, match="At least one"):
        mo.clamp(x)
    with pytest.raises(RuntimeError, match="can't be cast"):
        mo.clamp_(i.clone(), 0.5)


@pytest.mark.parametrize("dtype", [*DTYPES, torch.int64, torch.uint8, torch.bool], ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "broadcast_mask", "broadcast_self", "strided"])
def test_masked_fill(dtype: torch.dtype, layout: str) -> None:
    g = torch.Generator().manual_seed(7)
    self = (torch.randn(6, 5, 4, generator=g) * 5).to(DEVICE, dtype)
    mask = (torch.rand(6, 5, 4, generator=g) > 0.5).to(DEVICE)
    if layout == "broadcast_mask":
        mask = mask[:1, :, :1]
    elif layout == "broadcast_self":
        self = self[:, :1]
    elif layout == "strided":
        self, mask = self.transpose(0, 2), mask.permute(2, 1, 0)
    value = True if dtype == torch.bool else 3
    for v in (value, -2.75 if dtype.is_floating_point else value):
        got, want = mo.masked_fill_scalar(self, mask, v), aten.masked_fill.Scalar(self, mask, v)
        assert got.dtype == want.dtype and torch.equal(got, want)


def test_masked_fill_values_and_errors() -> None:
    x = torch.randn(4, 3).half().to(DEVICE)
    m = torch.tensor([True, False, True], device=DEVICE)
    for v in (INF, -INF, NAN, 65504.0):
        _same(mo.masked_fill_scalar(x, m, v), aten.masked_fill.Scalar(x, m, v))
    with pytest.raises(RuntimeError, match="without overflow"):
        mo.masked_fill_scalar(x, m, 1e10)
    with pytest.raises(RuntimeError, match="boolean masks"):
        mo.masked_fill_scalar(x, m.long(), 1.0)
    i = torch.arange(12, device=DEVICE).reshape(4, 3)
    _same(mo.masked_fill_scalar(i, m, -2.7), aten.masked_fill.Scalar(i, m, -2.7))


def test_minimum_maximum_integers_and_mixed() -> None:
    a = torch.arange(-5, 5, device=DEVICE)
    b = torch.arange(4, -6, -1, dtype=torch.int32, device=DEVICE)
    half = torch.tensor(0.5, device=DEVICE)
    for ours, ref in ((mo.minimum, aten.minimum), (mo.maximum, aten.maximum)):
        assert torch.equal(ours(a, b), ref(a, b))
        _same(ours(a, half), ref(a, half))
        t = torch.tensor([True, False, True], device=DEVICE)
        f = torch.tensor([False, False, True], device=DEVICE)
        assert torch.equal(ours(t, f), ref(t, f))


def test_inplace_and_out_variants_write_their_target() -> None:
    x = torch.randn(5, 6).to(DEVICE) * 3
    cases = [
        (act.hardsigmoid_, act.hardsigmoid_out, aten.hardsigmoid, ()),
        (act.hardswish_, act.hardswish_out, aten.hardswish, ()),
        (act.leaky_relu_, act.leaky_relu_out, aten.leaky_relu, (0.3,)),
        (act.elu_, act.elu_out, aten.elu, (1.2, 1.1, 0.9)),
        (mo.exp_, mo.exp_out, aten.exp, ()),
        (mo.sqrt_, mo.sqrt_out, aten.sqrt, ()),
        (mo.rsqrt_, mo.rsqrt_out, aten.rsqrt, ()),
        (mo.reciprocal_, mo.reciprocal_out, aten.reciprocal, ()),
        (mo.pow_scalar_, mo.pow_tensor_scalar_out, aten.pow.Tensor_Scalar, (1.7,)),
        (mo.clamp_, mo.clamp_out, aten.clamp, (-1.0, 1.0)),
    ]
    for inplace, out_fn, ref, args in cases:
        want = ref(x, *args)
        target = x.t().contiguous().t()  # a non-contiguous self is written in place
        assert inplace(target, *args) is target
        _same(target, want)
        out = torch.empty(0, device=DEVICE)
        assert out_fn(x, *args, out=out) is out
        _same(out, want)
    m = (torch.rand(6) > 0.5).to(DEVICE)
    target = x.clone()
    assert mo.masked_fill_scalar_(target, m, 9.0) is target
    _same(target, x.masked_fill(m, 9.0))
    out = torch.empty(0, device=DEVICE)
    assert mo.masked_fill_scalar_out(x, m, 9.0, out=out) is out
    _same(out, x.masked_fill(m, 9.0))
    y = torch.randn(6).to(DEVICE)
    for fn, ref in ((mo.minimum_out, torch.minimum), (mo.maximum_out, torch.maximum)):
        out = torch.empty(5, 6, dtype=torch.float64, device=DEVICE)
        assert fn(x, y, out=out) is out
        _same(out, ref(x, y).double())
    g = torch.randn(5, 6).to(DEVICE)
    out = torch.empty(5, 6, device=DEVICE)
    assert act.hardswish_backward(g, x, out=out) is out
    _same(out, aten.hardswish_backward(g, x))
    assert act.elu_backward(g, 1.0, 1.0, 1.0, False, x, grad_input=out) is out
    _same(out, aten.elu_backward(g, 1.0, 1.0, 1.0, False, x))


def test_declines_and_errors() -> None:
    i = torch.arange(4, device=DEVICE)
    for fn in (act.hardsigmoid, act.hardswish, act.leaky_relu, act.elu):
        with pytest.raises(NotImplementedError):
            fn(i)
    with pytest.raises(RuntimeError, match="negative slope"):
        act.leaky_relu_backward(torch.ones(3, device=DEVICE), torch.ones(3, device=DEVICE), -0.1,
                                True)  # fmt: skip
    with pytest.raises(RuntimeError, match="negative slope"):
        act.elu_backward(torch.ones(3, device=DEVICE), -1.0, 1.0, 1.0, True,
                         torch.ones(3, device=DEVICE))  # fmt: skip
    with pytest.raises(NotImplementedError):
        mo.exp(torch.ones(3, dtype=torch.complex64, device=DEVICE))
