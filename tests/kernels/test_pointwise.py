"""The pointwise family against eager PyTorch on CPU (Triton's interpreter): every op,
in f32, f16 and bf16, on contiguous, transposed, broadcast, 0-dim and empty inputs, and
the in-place and ``out=`` entry points, checked as the judge checks them (against eager
and a float64 reference)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from kernel_checks import DEVICE, assert_matches, on_device, stable_seed  # noqa: E402

from opbench.kernels._lib import activations as act  # noqa: E402
from opbench.kernels._lib import arithmetic as ar  # noqa: E402

aten = torch.ops.aten
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def _inputs(layout: str, dtype: torch.dtype, n: int = 2) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(stable_seed(layout, str(dtype)))

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
    if layout == "channels_last_bias":  # a channels-last image and a per-channel bias
        image = r(2, 12, 3, 5).to(memory_format=torch.channels_last)
        return [image, r(12, 1, 1)][:n]
    if layout == "channels_last":  # images laid out alike: the flat kernel over memory
        return [r(2, 12, 3, 5).to(memory_format=torch.channels_last) for _ in range(n)]
    if layout == "channels_last_3d":
        return [r(2, 6, 3, 4, 5).to(memory_format=torch.channels_last_3d) for _ in range(n)]
    raise AssertionError(layout)


LAYOUTS = ["contiguous", "transposed", "broadcast", "zero_dim", "empty", "sliced5d",
           "channels_last_bias", "channels_last", "channels_last_3d"]  # fmt: skip

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


def test_a_channels_last_result_is_walked_in_its_memory_order() -> None:
    """The strided kernel's flat index runs through a channels-last result as it lies in
    memory: with a per-channel bias its dimensions merge to ``[N*H*W, C]``, the result's
    and the image's innermost stride 1 and the bias's 1 (in logical order nothing merged
    and the innermost stride was ``C``); a contiguous result keeps its order."""
    from opbench.kernels._lib import pointwise as pw

    image = torch.randn(2, 12, 3, 5).to(memory_format=torch.channels_last)
    bias = torch.randn(12, 1, 1)
    out = torch.empty_like(image)
    modes = [pw.TENSOR, pw.TENSOR, pw.ABSENT]
    ints, _, ndim, *_ = pw._strided_plan(tuple(out.shape), modes, [image, bias, out], out,
                                         out.numel())  # fmt: skip
    n, d1, d2, d3, *strides = ints
    assert ndim == 2 and (d2, d3) == (2 * 3 * 5, 12), ints
    assert [strides[4 * k + 3] for k in range(4)] == [1, 1, 0, 1], ints  # innermost: C
    assert [strides[4 * k + 2] for k in range(4)] == [12, 0, 0, 12], ints
    assert pw._memory_order(torch.empty(4, 1, 5).stride()) == [0, 1, 2]


@pytest.mark.parametrize("flat_dense", [True, False], ids=["flat_dense", "strided"])
def test_channels_last_operands_laid_out_alike_take_the_flat_kernel(
    flat_dense, fresh_plans
) -> None:
    """A dense channels-last (or channels-last-3d) result whose full operands share its
    strides is one flat walk over memory (:data:`FLAT_DENSE_LAYOUTS`); an operand laid out
    otherwise, or a result with gaps, keeps the strided kernel. Both give eager's values
    and strides."""
    from opbench.kernels._lib import pointwise as pw

    fresh_plans.setattr(pw, "FLAT_DENSE_LAYOUTS", flat_dense)
    cl = torch.randn(2, 12, 3, 5).to(memory_format=torch.channels_last)
    cl3 = torch.randn(2, 6, 3, 4, 5).to(memory_format=torch.channels_last_3d)
    both = [pw.TENSOR, pw.TENSOR, pw.ABSENT]
    assert pw._flat_layout(both, [cl, cl.clone(), cl], torch.empty_like(cl)) is flat_dense
    assert pw._flat_layout(both, [cl3, cl3.clone(), cl3], torch.empty_like(cl3)) is flat_dense
    assert pw._flat_layout([pw.TENSOR, pw.ELEMENT, pw.ABSENT], [cl, torch.tensor(2.0), cl],
                           torch.empty_like(cl)) is flat_dense  # fmt: skip
    assert not pw._flat_layout(both, [cl, cl.contiguous(), cl], torch.empty_like(cl))
    gappy = torch.randn(2, 12, 3, 10).to(memory_format=torch.channels_last)[..., ::2]
    assert not pw._flat_layout(both, [gappy, gappy, gappy], gappy)
    x = on_device(cl)
    y = on_device(torch.randn(2, 12, 3, 5).to(memory_format=torch.channels_last))
    for got, want in ((ar.add(x, y), aten.add.Tensor(x, y)), (act.relu(x), aten.relu(x))):
        assert got.stride() == want.stride()
        torch.testing.assert_close(got, want)


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


# ------------------------------------------------------------------ launch plans (tile_plan)

from opbench.kernels._lib import math_ops as mo  # noqa: E402
from opbench.kernels._lib import pointwise as pw  # noqa: E402

#: element counts that reach every tile size and both kernel paths under the
#: interpreter's constants (programs of 4,096 elements at most, spread over 4): one
#: element, under a warp, a partial program, whole programs only, a count not divisible
#: by 16 over several programs (unmasked programs, then a masked last one), one divisible
#: by 16 but not by the program
SIZES = [1, 3, 100, 128, 1000, 4096, 16384, 8197, 4112]


@pytest.fixture
def fresh_plans(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """Empty plan caches around a test that changes the engine's tiling constants (the
    plans are built from them once per size or layout)."""
    for cache in (pw._FLAT_PLANS, pw._STRIDED_PLANS, pw._PLANS):
        cache.clear()
    yield monkeypatch
    monkeypatch.undo()
    for cache in (pw._FLAT_PLANS, pw._STRIDED_PLANS, pw._PLANS):
        cache.clear()


def _check_plan(n: int, top: int) -> None:
    grid, block, warps = pw.tile_plan(n)
    assert block & (block - 1) == 0 and block <= top
    assert (grid - 1) * block < n <= grid * block
    assert 1 <= warps <= pw.NUM_WARPS


@pytest.mark.parametrize("n", [*SIZES, 2, 31, 33, 1438452, 2**20, 10000, 2048])
def test_tile_plan_covers_every_element(n: int, fresh_plans: pytest.MonkeyPatch) -> None:
    _check_plan(n, pw._INTERP_BLOCK)
    fresh_plans.setattr(pw, "_INTERPRETING", False)  # the GPU's rule, checked on the CPU
    _check_plan(n, pw.BLOCK)
    fresh_plans.setattr(pw, "SMALL_EPT", 8)
    _check_plan(n, pw.BLOCK)
    fresh_plans.setattr(pw, "SMALL_TILES", False)
    assert pw.tile_plan(n) == (-(-n // pw.BLOCK), pw.BLOCK, pw.NUM_WARPS)  # the old rule


def test_tile_plan_on_the_gpu_for_the_traced_sizes(fresh_plans: pytest.MonkeyPatch) -> None:
    fresh_plans.setattr(pw, "_INTERPRETING", False)
    assert pw.tile_plan(1) == (1, 1, 1)  # a 0-dim tensor: one lane of one warp
    assert pw.tile_plan(128) == (1, 128, 4)  # rsqrt [1, 128, 1, 1]: an element a thread
    assert pw.tile_plan(1024) == (8, 128, 4)
    assert pw.tile_plan(10000) == (79, 128, 4)  # clamp [5000, 2] (strided)
    assert pw.tile_plan(30000) == (118, 256, 4)  # two elements a thread
    assert pw.tile_plan(1438452) == (1405, 1024, 4)  # large inputs as before
    fresh_plans.setattr(pw, "MIN_BLOCK", 512)  # FlagGems' tiles on small inputs
    assert pw.tile_plan(128) == (1, 128, 4)
    assert pw.tile_plan(1024) == (2, 512, 4)
    fresh_plans.setattr(pw, "SMALL_EPT", 8)  # fewer warps
    assert pw.tile_plan(128) == (1, 128, 1)
    assert pw.tile_plan(1024) == (2, 512, 2)


def _operand_cases(n: int, dtype: torch.dtype) -> list[tuple[str, torch.Tensor, object]]:
    g = torch.Generator().manual_seed(n)
    x = (torch.randn(n, generator=g) * 3).to(DEVICE, dtype)
    y = (torch.randn(n, generator=g) * 3).to(DEVICE, dtype)
    zero_dim = torch.tensor(-1.5, dtype=dtype, device=DEVICE)
    return [("tensor", x, y), ("element", x, zero_dim), ("number", x, 0.75)]


SETTINGS = {
    "default": {},
    "before": {"SMALL_TILES": False},
    "one_program": {"SPREAD": 1, "MIN_BLOCK": 32, "SMALL_EPT": 8},
    "wide_small": {"MIN_BLOCK": 256, "SMALL_EPT": 2},
}


@pytest.mark.slow
@pytest.mark.parametrize("setting", sorted(SETTINGS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_every_tile_size_and_path_matches_eager(
    setting: str, dtype: torch.dtype, fresh_plans: pytest.MonkeyPatch
) -> None:
    for name, value in SETTINGS[setting].items():
        fresh_plans.setattr(pw, name, value)
    for n in SIZES:
        for _, x, other in _operand_cases(n, dtype):
            assert_matches(ar.add(x, other, alpha=2), aten.add.Tensor, x, other, alpha=2)
        x = _operand_cases(n, dtype)[0][1]
        assert_matches(mo.rsqrt(x.abs() + 0.5), aten.rsqrt, x.abs() + 0.5)
        assert_matches(mo.clamp(x, None, 1.25), aten.clamp, x, None, 1.25)
        s = x.repeat_interleave(2)[::2]  # strided: every other element
        assert_matches(mo.clamp(s, -1.0, 2.0), aten.clamp, s, -1.0, 2.0)
        _writes_nothing_past_the_end(n, dtype)
    z = torch.tensor(2.25, dtype=dtype, device=DEVICE)  # 0-dim first operand
    assert_matches(mo.sqrt(z), aten.sqrt, z)


def _writes_nothing_past_the_end(n: int, dtype: torch.dtype) -> None:
    """``out=`` and in-place results as the first ``n`` elements of a larger buffer: the
    elements after them (a whole program's worth) must keep their sentinel."""
    x, y = _operand_cases(n, dtype)[0][1:]
    guard = pw._BLOCK_NOW + 64
    for write in (
        lambda out: ar.add_out(x, y, out=out),
        lambda out: mo.rsqrt_out(x.abs() + 0.5, out=out),
        lambda out: ar.add_(out.copy_(x), y),
        lambda out: mo.clamp_(out.copy_(x), None, 1.25),
    ):
        buf = torch.full((n + guard,), 7.0, dtype=dtype, device=DEVICE)
        write(buf[:n])
        assert torch.equal(buf[n:], torch.full((guard,), 7.0, dtype=dtype, device=DEVICE))
    buf = torch.full((n + guard,), 7.0, dtype=dtype, device=DEVICE)
    ar.add_out(x, y, out=buf[:n])
    torch.testing.assert_close(buf[:n], x + y)


def test_a_negative_zero_operand_keeps_its_sign() -> None:
    x = torch.tensor([-0.0, 0.0, -0.0, 1.0], device=DEVICE)
    for other in (-0.0, torch.tensor(-0.0, device=DEVICE)):
        got = ar.add(x, other)
        want = x + other
        assert torch.equal(torch.signbit(got), torch.signbit(want)), (other, got)
