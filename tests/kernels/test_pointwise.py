"""The pointwise family against eager PyTorch on CPU (Triton's interpreter): every op,
in f32, f16 and bf16, on contiguous, transposed, broadcast, 0-dim and empty inputs, and
the in-place and ``out=`` entry points, checked as the judge checks them (against eager
and a float64 reference)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from kernel_checks import DEVICE, assert_matches  # noqa: E402

from opbench.kernels._lib import activations as act  # noqa: E402
from opbench.kernels._lib import arithmetic as ar  # noqa: E402

aten = torch.ops.aten
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def _inputs(layout: str, dtype: torch.dtype, n: int = 2) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(hash((layout, str(dtype))) % 2**31)

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
            [r(4, 3), torch.tensor(1.25, dtype=dtype, device=DEVICE)][:n]
            if n == 2
            else [r(1).reshape(())]
        )
    if layout == "empty":
        return [r(0, 3) for _ in range(n)]
    if layout == "sliced5d":
        return [r(2, 3, 4, 5, 8)[..., ::2].permute(4, 2, 0, 3, 1) for _ in range(n)]
    raise AssertionError(layout)


LAYOUTS = ["contiguous", "transposed", "broadcast", "zero_dim", "empty", "sliced5d"]

BINARY = {
    "add": (ar.add, lambda a, b: aten.add.Tensor(a, b, alpha=2), {"alpha": 2}),
    "sub": (ar.sub, aten.sub.Tensor, {}),
    "mul": (ar.mul, aten.mul.Tensor, {}),
    "div": (ar.div, aten.div.Tensor, {}),
    "threshold_backward": (
        lambda g, x: act.threshold_backward(g, x, 0.5),
        lambda g, x: aten.threshold_backward(g, x, 0.5),
        None,
    ),
    "gelu_backward": (act.gelu_backward, aten.gelu_backward, None),
    "silu_backward": (act.silu_backward, aten.silu_backward, None),
    "sigmoid_backward": (act.sigmoid_backward, aten.sigmoid_backward, None),
    "tanh_backward": (act.tanh_backward, aten.tanh_backward, None),
}

UNARY = {
    "relu": (act.relu, aten.relu),
    "neg": (ar.neg, aten.neg),
    "sigmoid": (act.sigmoid, aten.sigmoid),
    "tanh": (act.tanh, aten.tanh),
    "silu": (act.silu, aten.silu),
    "gelu": (act.gelu, aten.gelu),
    "gelu_tanh": (
        lambda x: act.gelu(x, approximate="tanh"),
        lambda x: aten.gelu(x, approximate="tanh"),
    ),
    "hardtanh": (lambda x: act.hardtanh(x, -0.5, 2.0), lambda x: aten.hardtanh(x, -0.5, 2.0)),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary(name: str, layout: str, dtype: torch.dtype) -> None:
    ours, ref, kwargs = BINARY[name]
    a, b = _inputs(layout, dtype)
    if kwargs is not None:
        assert_matches(ours(a, b, **kwargs), ref, a, b)
    else:
        a, b = torch.broadcast_tensors(a, b)  # backward ops take same-shaped grad and input
        assert_matches(ours(a, b), ref, a, b)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name: str, layout: str, dtype: torch.dtype) -> None:
    ours, ref = UNARY[name]
    (a,) = _inputs(layout, dtype, n=1)
    assert_matches(ours(a), ref, a)


SPECIAL = torch.tensor(
    [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1e-30, -1e4, 88.0], device=DEVICE
)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_special_values(name: str) -> None:
    ours, ref = UNARY[name]
    x = SPECIAL
    if name == "gelu":
        # eager's vectorised f32 erf-gelu on the CPU gives gelu(+inf) = NaN (float64 and
        # the tanh form give +inf); that quirk is the CPU's, not the op's
        x = x[x != float("inf")]
    assert_matches(ours(x), ref, x)


def _same(got: torch.Tensor, want: torch.Tensor) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got, want, equal_nan=True)


def test_scalars_and_integer_promotion() -> None:
    i = torch.arange(-6, 6, dtype=torch.int32, device=DEVICE)
    _same(ar.add(i, 3), i + 3)
    _same(ar.add(i, 2.5), i + 2.5)  # int tensor + float scalar -> float
    four = torch.tensor(4, device=DEVICE)
    _same(ar.div(i, four), i / four)
    t = torch.ones(3, dtype=torch.bool, device=DEVICE)
    m = torch.tensor([True, False, True], device=DEVICE)
    _same(ar.mul(t, m), t * m)
    ones = torch.ones(4, device=DEVICE)
    _same(ar.rsub(ones, 3.0, 2), aten.rsub.Scalar(ones, 3.0, 2))
    h = torch.randn(8, dtype=torch.float16).to(DEVICE)
    s = torch.tensor(1.5, dtype=torch.float32, device=DEVICE)
    _same(ar.add(h, s), h + s)


def test_where_broadcasts_condition_and_scalars() -> None:
    c = (torch.randn(4, 1, 5) > 0).to(DEVICE)
    x = torch.randn(3, 1).to(DEVICE)
    _same(ar.where(c, x, 0.0), torch.where(c, x, 0.0))
    _same(ar.where(c, 1.0, x.half()), torch.where(c, 1.0, x.half()))


def test_inplace_and_out_variants_write_their_target() -> None:
    x = torch.randn(6, 4).to(DEVICE)
    y = torch.randn(4).to(DEVICE)
    target = x.clone()
    assert ar.add_(target, y, 3) is target
    _same(target, x + 3 * y)
    strided = torch.randn(4, 6).to(DEVICE).t()  # a non-contiguous self is written in place
    expect = torch.relu(strided)
    assert act.relu_(strided) is strided
    _same(strided, expect)
    out = torch.empty(0, device=DEVICE)
    assert ar.mul_out(x, y, out=out) is out
    _same(out, x * y)
    with pytest.raises(RuntimeError, match="can't be cast"):
        ar.add_(torch.zeros(3, dtype=torch.int64, device=DEVICE), torch.ones(3, device=DEVICE))
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        ar.add_(torch.zeros(3, device=DEVICE), torch.ones(2, 3, device=DEVICE))
    with pytest.warns(UserWarning, match="resized"):
        ar.add_out(x, y, out=torch.empty(2, device=DEVICE))


def test_declines_what_it_does_not_implement() -> None:
    with pytest.raises(NotImplementedError):
        ar.div(torch.ones(3, dtype=torch.int64, device=DEVICE), 2, rounding_mode="floor")
    with pytest.raises(ValueError, match="rounding_mode"):
        ar.div(torch.ones(3, device=DEVICE), 2.0, rounding_mode="round")
    with pytest.raises(NotImplementedError):
        act.sigmoid(torch.ones(3, dtype=torch.int64, device=DEVICE))


@pytest.mark.parametrize("mode", ["trunc", "floor"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_div_rounding_modes(mode: str, dtype: torch.dtype) -> None:
    a = (torch.randn(41, 7) * 20).to(DEVICE, dtype)
    b = torch.tensor([3.0, -3.0, 0.5, -0.25, 7.0, 0.0, -0.0]).to(DEVICE, dtype)
    assert_matches(ar.div(a, b, rounding_mode=mode), aten.div.Tensor_mode, a, b, rounding_mode=mode)
    with pytest.raises(NotImplementedError):
        ar.div(torch.arange(4, device=DEVICE), 3, rounding_mode=mode)
