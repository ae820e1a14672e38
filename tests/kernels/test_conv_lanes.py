"""The pointwise convolutions' lanes (``conv_pointwise._LANES``): a repeat call of a
signature launches the product its first call launched through that launch's lane, and
gives the first call's bits; a lane made under other settings, or an address of another
alignment, is not used and the full path serves the call.

Under Triton's interpreter nothing is compiled, so no lane is made: the CPU tests here
put a lane in by hand (which addresses it is given; one that raises turns lanes off),
the GPU tests check real ones. Run those with
``OPBENCH_KERNEL_DEVICE=cuda python3 -m pytest tests/kernels/test_conv_lanes.py``."""

from __future__ import annotations

from typing import Any

import pytest
import torch

pytest.importorskip("triton")

from kernel_checks import DEVICE  # noqa: E402

from opbench.kernels._lib import (  # noqa: E402
    conv,
    conv_backward,  # noqa: E402
    conv_pointwise,
    matmul_lanes,
)

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="lanes are made on CUDA")
GEOMETRY = ([1, 1], [0, 0], [1, 1], False, [0, 0], 1)

#: (input shape, output channels, channels-last): NCHW whose 121 positions an image are
#: not 16-byte rows (the weight gradient copies both operands channels-last in f16 and f32:
#: its partials would outweigh half the copies, ``POINTWISE_WGRAD_TRANSPOSE_MIN``), a
#: channels-last batch (the images merge into one product), one position an image
CASES = [((16, 192, 11, 11), 192, False), ((8, 64, 14, 14), 96, True), ((32, 128, 1, 1), 64, False)]
TOLERANCE = {torch.float16: 2e-2, torch.float32: 1e-4}


@pytest.fixture
def lanes(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Fresh plans and lanes, and what every lane launch answered (True: launched)."""
    monkeypatch.setattr(conv_pointwise, "_LANES", {})
    monkeypatch.setattr(conv, "_FORWARD_PLANS", {})
    monkeypatch.setattr(conv_backward, "_POINTWISE_WGRAD_PLANS", {})
    answers: list[bool] = []
    real = conv_pointwise.run_lane

    def spy(*args: Any) -> bool:
        answers.append(real(*args))
        return answers[-1]

    monkeypatch.setattr(conv_pointwise, "run_lane", spy)
    return answers


def _operands(shape: tuple[int, ...], c_out: int, channels_last: bool, dtype: torch.dtype):
    g = torch.Generator(device="cuda").manual_seed(0)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    x = torch.randn(shape, device="cuda", generator=g).to(dtype).contiguous(memory_format=fmt)
    w = torch.randn((c_out, shape[1], 1, 1), device="cuda", generator=g).to(dtype) * 0.1
    w = w.contiguous(memory_format=fmt)
    bias = torch.randn((c_out,), device="cuda", generator=g).to(dtype)
    go = torch.randn((shape[0], c_out, *shape[2:]), device="cuda", generator=g).to(dtype)
    return x, w, bias, go.contiguous(memory_format=fmt)


def _both(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor, go: torch.Tensor) -> list:
    geometry = ([1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    y = conv.convolution(x, w, bias, *geometry)
    gi, gw, _ = conv_backward.convolution_backward(go, x, w, None, *geometry, [True, True, False])
    return [y, gi, gw]


@cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=str)
@pytest.mark.parametrize("case", CASES, ids=["nchw-copies", "channels-last", "one-position"])
def test_a_repeat_call_goes_through_the_lanes_and_gives_the_same_bits(case, dtype, lanes) -> None:
    x, w, bias, go = _operands(*case, dtype)
    first = _both(x, w, bias, go)
    assert lanes == [], "a first call has no lane to launch"
    second = _both(x, w, bias, go)
    # the forward, the input gradient (a forward) and the weight gradient's merged product
    assert lanes == [True, True, True], lanes
    for a, b in zip(first, second, strict=True):
        assert torch.equal(a, b)
        assert a.stride() == b.stride()
    eager = [
        torch.ops.aten.convolution(x, w, bias, [1, 1], [0, 0], [1, 1], False, [0, 0], 1),
        *torch.ops.aten.convolution_backward(
            go, x, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [True, True, False]
        )[:2],
    ]
    for got, want in zip(second, eager, strict=True):
        tol = TOLERANCE[dtype] * max(1.0, want.abs().max().item())
        torch.testing.assert_close(got, want, rtol=TOLERANCE[dtype], atol=tol)


@cuda
def test_a_lane_made_under_other_settings_is_not_used(lanes, monkeypatch) -> None:
    x, w, bias, go = _operands(*CASES[0], torch.float16)
    first = _both(x, w, bias, go)
    monkeypatch.setattr(conv_pointwise, "POINTWISE_CONFIG", (64, 64, 32, 8, 4, 3))
    second = _both(x, w, bias, go)
    assert lanes == [], "the lanes were made under the old tile"
    for a, b in zip(first, second, strict=True):
        torch.testing.assert_close(a, b, rtol=2e-2, atol=2e-2 * max(1.0, a.abs().max().item()))


@cuda
def test_an_address_of_another_alignment_takes_the_full_path(lanes) -> None:
    x, w, bias, go = _operands(*CASES[0], torch.float16)
    _both(x, w, bias, go)
    # the same sizes and strides two bytes further on: a lane compiled for 16-byte
    # aligned operands declines, and the full path serves the call
    store = torch.empty(x.numel() + 8, device="cuda", dtype=x.dtype)
    shifted = store[1 : 1 + x.numel()].view(x.shape).copy_(x)
    got = conv.convolution(shifted, w, bias, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    assert lanes == [False], lanes
    want = conv.convolution(x, w, bias, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2)


def _planned_forward_key(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> tuple:
    """The forward's plan key after a first call (the full path) has made the plan."""
    conv.convolution(x, w, bias, *GEOMETRY)
    (key,) = conv._FORWARD_PLANS
    return key


def test_a_repeat_call_hands_its_lane_the_tensors_addresses(lanes) -> None:
    """The lane of a planned forward gets the weight, the input, a fresh output laid out
    as the plan's and the bias (every view the product reads starts where its tensor
    does), and its answer decides: launched, the output is returned as it is."""
    x = torch.randn(2, 8, 3, 3, device=DEVICE).contiguous(memory_format=torch.channels_last)
    w, bias = torch.randn(4, 8, 1, 1, device=DEVICE), torch.randn(4, device=DEVICE)
    key = _planned_forward_key(x, w, bias)
    seen: list[tuple[int, ...]] = []

    def lane(*args: Any) -> bool:
        seen.append(args)
        return True

    conv_pointwise._LANES[("forward", key)] = (conv_pointwise._settings(), lane)
    out = conv.convolution(x, w, bias, *GEOMETRY)
    assert lanes == [True]
    assert seen == [(w.data_ptr(), x.data_ptr(), out.data_ptr(), bias.data_ptr(), 1.0, 1.0)]
    assert out.is_contiguous(memory_format=torch.channels_last)  # the plan's layout


def test_a_lane_that_raises_turns_lanes_off_and_the_full_path_serves(lanes, monkeypatch) -> None:
    monkeypatch.setattr(matmul_lanes, "LANES_OFF", [])
    x = torch.randn(2, 8, 3, 3, device=DEVICE)
    w, bias = torch.randn(4, 8, 1, 1, device=DEVICE), torch.randn(4, device=DEVICE)
    key = _planned_forward_key(x, w, bias)

    def refused(*args: Any) -> bool:
        raise TypeError("an argument the launcher cannot read")

    conv_pointwise._LANES[("forward", key)] = (conv_pointwise._settings(), refused)
    with pytest.warns(RuntimeWarning, match="lanes are off"):
        got = conv.convolution(x, w, bias, *GEOMETRY)
    assert lanes == [False] and matmul_lanes.LANES_OFF
    torch.testing.assert_close(got, torch.nn.functional.conv2d(x, w, bias), rtol=1e-4, atol=1e-4)
    conv.convolution(x, w, bias, *GEOMETRY)  # lanes off: not even asked
    assert lanes == [False]
