"""Convolution forward (implicit GEMM) against eager PyTorch and a float64 reference on CPU
(Triton's interpreter): 1-, 2- and 3-D; stride, padding, dilation; groups and depthwise;
transposed with output_padding; contiguous and channels-last inputs and weights (the
output in eager's memory format); bias or none; f32, f16, bf16; float64 declined. The
depthwise kernels' own cases: ``test_conv_depthwise.py``."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from kernel_checks import DEVICE, assert_matches, launch_grids  # noqa: E402
from kernel_checks import seeded_randn as _r

from opbench.kernels._lib import (  # noqa: E402
    conv,
    conv_backward,
    conv_pointwise,
)

aten = torch.ops.aten
DTYPES = [torch.float32, torch.float16, torch.bfloat16]

# name: (input shape, weight shape, stride, padding, dilation, transposed, output_padding, groups)
CASES = {
    "1d": ((2, 3, 11), (5, 3, 3), [1], [1], [1], False, [0], 1),
    "1d_strided_dilated": ((2, 4, 20), (6, 4, 3), [2], [2], [3], False, [0], 1),
    "2d": ((2, 3, 9, 8), (4, 3, 3, 3), [1, 1], [1, 1], [1, 1], False, [0, 0], 1),
    "2d_asymmetric": ((1, 5, 10, 7), (7, 5, 2, 3), [2, 1], [0, 2], [1, 2], False, [0, 0], 1),
    "2d_groups": ((2, 6, 7, 7), (9, 2, 3, 3), [1, 1], [1, 1], [1, 1], False, [0, 0], 3),
    "2d_depthwise": ((2, 8, 9, 9), (8, 1, 3, 3), [2, 2], [1, 1], [1, 1], False, [0, 0], 8),
    "2d_pointwise": ((2, 20, 5, 6), (17, 20, 1, 1), [1, 1], [0, 0], [1, 1], False, [0, 0], 1),
    "2d_pointwise_transposed": ((2, 6, 4, 5), (6, 9, 1, 1), [1, 1], [0, 0], [1, 1], True, [0, 0],
                                1),
    "3d_pointwise": ((2, 5, 3, 2, 4), (7, 5, 1, 1, 1), [1, 1, 1], [0, 0, 0], [1, 1, 1], False,
                     [0, 0, 0], 1),
    "3d": ((1, 2, 5, 6, 7), (3, 2, 2, 3, 3), [1, 2, 1], [1, 0, 1], [1, 1, 2], False, [0, 0, 0], 1),
    "1d_transposed": ((2, 4, 7), (4, 3, 3), [2], [1], [1], True, [1], 1),
    "2d_transposed": ((2, 3, 5, 4), (3, 5, 3, 2), [2, 3], [1, 0], [1, 2], True, [1, 2], 1),
    # unit stride: the transposed kernel's branch without division (every input
    # gradient of a stride-1 convolution takes it too)
    "2d_transposed_unit_stride": ((2, 3, 5, 4), (3, 5, 3, 2), [1, 1], [1, 0], [1, 2], True,
                                  [0, 0], 1),
    "2d_transposed_groups": ((1, 4, 5, 5), (4, 3, 3, 3), [2, 2], [1, 1], [1, 1], True, [0, 1], 2),
    "3d_transposed": ((1, 2, 3, 4, 3), (2, 3, 2, 2, 3), [2, 1, 2], [0, 1, 1], [1, 1, 1], True,
                      [1, 0, 0], 1),
}  # fmt: skip


def _args(case: str, dtype: torch.dtype, bias: bool) -> list:
    shape, wshape, stride, padding, dilation, transposed, out_pad, groups = CASES[case]
    x = _r(shape, dtype, 1)
    w = _r(wshape, dtype, 2)
    c_out = wshape[1] * groups if transposed else wshape[0]
    b = _r((c_out,), dtype, 3) if bias else None
    return [x, w, b, stride, padding, dilation, transposed, out_pad, groups]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", list(CASES))
def test_convolution(case: str, dtype: torch.dtype) -> None:
    args = _args(case, dtype, bias=case.endswith(("d", "groups")) or "dilated" in case)
    got = conv.convolution(*args)
    eager = aten.convolution(*args)
    assert got.shape == eager.shape and got.dtype == eager.dtype
    assert got.stride() == eager.stride()
    assert_matches(got, aten.convolution, *args)


@pytest.mark.parametrize("case", ["2d", "2d_depthwise", "2d_transposed", "3d", "2d_pointwise",
                                  "2d_pointwise_transposed"])  # fmt: skip
@pytest.mark.parametrize("which", ["input", "weight", "both"])
def test_channels_last(case: str, which: str) -> None:
    args = _args(case, torch.float32, bias=True)
    fmt = torch.channels_last if args[0].dim() == 4 else torch.channels_last_3d
    if which in ("input", "both"):
        args[0] = args[0].to(memory_format=fmt)
    if which in ("weight", "both"):
        args[1] = args[1].to(memory_format=fmt)
    got = conv.convolution(*args)
    eager = aten.convolution(*args)
    if args[0].dim() == 4:  # 3-D: eager on the CPU picks by its backend (cuDNN's rule here)
        assert got.stride() == eager.stride()
    assert_matches(got, aten.convolution, *args)


def test_sliced_input_read_in_place() -> None:
    x = _r((2, 6, 12, 10), torch.float32, 4)[:, ::2, 1:, ::2]
    w = _r((4, 3, 3, 3), torch.float32, 5)
    args = [x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1]
    assert_matches(conv.convolution(*args), aten.convolution, *args)


def test_declined_cases_go_to_pytorch() -> None:
    x = torch.randn(1, 2, 5, 5, dtype=torch.float64)
    w = torch.randn(3, 2, 3, 3, dtype=torch.float64)
    with pytest.raises(NotImplementedError):
        conv.convolution(x, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    with pytest.raises(NotImplementedError):  # unbatched input
        conv.convolution(x[0].float(), w.float(), None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)


def _backward_args(case: str, dtype: torch.dtype, mask: list[bool]) -> list:
    x, w, b, stride, padding, dilation, transposed, out_pad, groups = _args(case, dtype, True)
    y = aten.convolution(x, w, b, stride, padding, dilation, transposed, out_pad, groups)
    gy = _r(tuple(y.shape), dtype, 6)
    return [gy, x, w, [b.numel()], stride, padding, dilation, transposed, out_pad, groups, mask]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", list(CASES))
def test_convolution_backward(case: str, dtype: torch.dtype) -> None:
    args = _backward_args(case, dtype, [True, True, True])
    got = conv_backward.convolution_backward(*args)
    eager = aten.convolution_backward(*args)
    assert [tuple(t.shape) for t in got] == [tuple(t.shape) for t in eager]
    assert_matches(got, aten.convolution_backward, *args)


@pytest.mark.parametrize("mask", [[True, False, False], [False, True, False], [False, True, True],
                                  [True, True, False]])  # fmt: skip
def test_convolution_backward_output_mask(mask: list[bool]) -> None:
    args = _backward_args("2d_groups", torch.float32, mask)
    got = conv_backward.convolution_backward(*args)
    assert [t is None for t in got] == [not m for m in mask]
    assert_matches(got, aten.convolution_backward, *args)


@pytest.mark.parametrize("case", ["2d", "2d_depthwise", "2d_transposed", "2d_pointwise"])
def test_convolution_backward_channels_last(case: str) -> None:
    args = _backward_args(case, torch.float32, [True, True, True])
    args[:3] = [t.to(memory_format=torch.channels_last) for t in args[:3]]
    assert_matches(conv_backward.convolution_backward(*args), aten.convolution_backward, *args)


@pytest.mark.skipif(DEVICE != "cpu", reason="a CPU-only decline")
def test_bias_gradient_alone_is_declined_on_the_cpu() -> None:
    """Eager's CPU kernels return the weight gradient with the bias's even when not asked:
    that case goes to PyTorch rather than guessing its result structure."""
    args = _backward_args("2d", torch.float32, [True, False, True])
    assert aten.convolution_backward(*args)[1] is not None
    with pytest.raises(NotImplementedError):
        conv_backward.convolution_backward(*args)


def _wgrad_columns(monkeypatch, flat: bool) -> None:
    """Force the weight gradient's column layout: flat (every flat grid "fills" a GPU of
    one multiprocessor) or a kernel position a program (the flat floor at 0)."""
    if flat:
        monkeypatch.setattr(conv_backward, "sm_count", lambda device: 1)
    else:
        monkeypatch.setattr(conv_backward, "WGRAD_FLAT_MAX_CHANNELS", 0)


@pytest.mark.slow  # over 1.5 s on 2 cores (2026-11-28, --durations)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("flat", [True, False], ids=["flat-taps", "tap-a-program"])
def test_weight_gradient_split_over_positions(dtype: torch.dtype, channels_last: bool,
                                              flat: bool, monkeypatch) -> None:  # fmt: skip
    """Few weights over many positions (a network's stem): the positions are split across
    programs and their fp32 partials summed by a second kernel, in the weight's layout,
    with either column layout of the kernel."""
    _wgrad_columns(monkeypatch, flat)
    x, w = _r((2, 3, 48, 48), dtype, 1), _r((4, 3, 3, 3), dtype, 2)
    if channels_last:
        x, w = x.to(memory_format=torch.channels_last), w.to(memory_format=torch.channels_last)
    conv_args = [[1, 1], [1, 1], [1, 1], False, [0, 0], 1]
    gy = _r((2, 4, 48, 48), dtype, 6)
    args = [gy, x, w, None, *conv_args, [False, True, False]]
    P, bk = 2 * 48 * 48, 256  # the interpreter's position tile
    assert conv_backward.split_plan(1, -(-P // bk), x.device)[0] > 1
    got = conv_backward.convolution_backward(*args)
    assert got[1].stride() == aten.convolution_backward(*args)[1].stride()
    assert_matches(got, aten.convolution_backward, *args)


@pytest.mark.parametrize("padded_rows", [False, True], ids=["dense", "rows-of-9"])
@pytest.mark.parametrize("flat", [True, False], ids=["flat-taps", "tap-a-program"])
def test_weight_gradient_a_runs(flat: bool, padded_rows: bool, monkeypatch) -> None:
    """``WGRAD_A_RUNS``: grad_output's runs of positions loaded as proven vectors where
    its strides allow (8 output columns, dense rows), not where a row is 9 apart (a
    width-sliced view: the proof fails and the plain loads serve); eager's result both ways,
    in both column layouts. A wrong proof would restate the row stride of 9 as 8."""
    _wgrad_columns(monkeypatch, flat)
    monkeypatch.setattr(conv_backward, "WGRAD_A_RUNS", True)
    launched: list[bool] = []
    real = conv_backward._wgrad
    monkeypatch.setattr(conv_backward, "_wgrad",
                        lambda *a, **k: (launched.append(k["A_RUNS"]), real(*a, **k))[1])  # fmt: skip
    x, w = _r((2, 3, 16, 16), torch.float16, 1), _r((8, 3, 3, 3), torch.float16, 2)
    gy = (
        _r((2, 8, 8, 9), torch.float16, 3)[..., :8]
        if padded_rows
        else _r((2, 8, 8, 8), torch.float16, 3)
    )
    args = [gy, x, w, None, [2, 2], [1, 1], [1, 1], False, [0, 0], 1, [False, True, False]]
    assert_matches(conv_backward.convolution_backward(*args), aten.convolution_backward, *args)
    assert launched == [not padded_rows], launched


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("flat", [True, False], ids=["flat-taps", "tap-a-program"])
@pytest.mark.parametrize("case", ["1d_strided_dilated", "2d_asymmetric", "2d_groups", "3d",
                                  "2d_transposed_groups", "3d_transposed", "2d_asymmetric-cl",
                                  "3d-cl"])  # fmt: skip
def test_weight_gradient_columns(case: str, flat: bool, dtype: torch.dtype,
                                 monkeypatch) -> None:  # fmt: skip
    """The weight gradient kernel's two column layouts against eager: (channel, kernel
    position) pairs (``FLAT_TAPS``, which groups of few channels of ``b`` take: an RGB
    stem's 3) and one kernel position a program (the floor at 0 forces it), over
    strides, dilation, groups, 1-3-D, transposed convolutions and channels-last
    operands."""
    _wgrad_columns(monkeypatch, flat)
    launched: list[bool] = []
    real = conv_backward._wgrad
    monkeypatch.setattr(conv_backward, "_wgrad",
                        lambda *a, **k: (launched.append(k["FLAT_TAPS"]), real(*a, **k))[1])  # fmt: skip
    args = _backward_args(case.removesuffix("-cl"), dtype, [False, True, False])
    if case.endswith("-cl"):  # channels-last operands: b's positions not contiguous
        fmt = torch.channels_last if args[1].dim() == 4 else torch.channels_last_3d
        args[:2] = [t.to(memory_format=fmt) for t in args[:2]]
    assert_matches(conv_backward.convolution_backward(*args), aten.convolution_backward, *args)
    assert launched == [flat]


def test_weight_gradient_takes_flat_columns_where_their_grid_fills_the_gpu(monkeypatch) -> None:
    """Few channels of ``b`` a group: flat (channel, kernel position) columns where the
    positions are split across programs (an RGB stem's 802,816) or the grid fills the GPU
    or launches as many programs as a kernel position a program would; a tiny problem
    (the zoo ResNet's 512 positions), whose flat grid is 1-3 programs against 9, keeps a
    kernel position a program; ``WGRAD_FLAT_MAX_CHANNELS`` (48) or a 1x1 kernel never go
    flat."""
    monkeypatch.setattr(conv_backward, "_INTERPRETING", False)
    from opbench.kernels._lib import matmul

    gpu = torch.device("cpu")  # with an H100's 132 multiprocessors
    monkeypatch.setattr(conv_backward, "sm_count", lambda device: 132)
    monkeypatch.setattr(matmul, "sm_count", lambda device: 132)
    layout = conv_backward._wgrad_layout
    stem = layout(128 * 112 * 112, 64, 3, 49, 1, False, gpu)
    assert stem.flat and stem.columns == 147 and stem.programs == 1 and stem.splits > 1
    # a 3x3 stem: one flat tile, split 128 ways (the splits' cap), under the GPU's 132
    assert layout(128 * 112 * 112, 32, 3, 9, 1, False, gpu).flat
    # a ViT's 16x16 patches: 768 columns in 12 tiles x 12 row tiles, no split needed
    vit = layout(64 * 14 * 14, 768, 3, 256, 1, False, gpu)
    assert vit.flat and vit.splits == 1
    assert layout(64 * 14 * 14, 384, 3, 256, 1, False, gpu).flat  # 72 programs, long
    assert not layout(2 * 16 * 16, 16, 16, 9, 1, True, gpu).flat
    tiny = layout(2 * 16 * 16, 16, 12, 9, 1, True, gpu)
    assert not tiny.flat and tiny.programs == 9
    assert not layout(128 * 56 * 56, 64, 8, 1, 8, False, gpu).flat
    # a strided 3x3 of 18 channels, and 16 a group in 8 groups: flat; 48 channels: per tap
    assert layout(128 * 28 * 28, 18, 18, 9, 1, False, gpu).flat
    assert layout(128 * 14 * 14, 16, 16, 9, 8, False, gpu).flat
    assert not layout(128 * 28 * 28, 48, 48, 9, 1, False, gpu).flat
    assert layout(128 * 28 * 28, 64, 8, 9, 8, False, gpu).flat


@pytest.mark.parametrize("ruled", [False, True], ids=["tables", "ruled"])
@pytest.mark.parametrize("case", ["2d_pointwise", "2d_pointwise_transposed", "3d_pointwise"])
def test_pointwise_convolutions_run_as_matrix_products(case: str, ruled: bool,
                                                       monkeypatch) -> None:  # fmt: skip
    """1x1, stride 1, unpadded, one group: the forward pass and the weight gradient go to
    the matmul kernel (per-image products over views; the weight gradient summed over the
    images in one reduction, ``test_pointwise_conv.py``), not the implicit GEMM; their
    products served by the tables or (``POINTWISE_RULED``) by the matmul shape rule."""
    monkeypatch.setattr(conv_pointwise, "POINTWISE_RULED", ruled)
    x, w, b, stride, padding, dilation, transposed, out_pad, groups = _args(case, torch.float32,
                                                                            True)  # fmt: skip
    assert conv_pointwise._pointwise(w.shape[2:], stride, padding, out_pad, groups)
    eager = aten.convolution(x, w, b, stride, padding, dilation, transposed, out_pad, groups)
    out = torch.empty_like(eager)
    plan = conv_pointwise.forward_plan(x, w, b, out, transposed)
    assert plan is not None
    conv_pointwise.pointwise_forward(plan, x, w, b, out)
    assert_matches(out, aten.convolution, x, w, b, stride, padding, dilation, transposed,
                   out_pad, groups)  # fmt: skip
    gy = _r(tuple(eager.shape), torch.float32, 9)
    a, src = (x, gy) if transposed else (gy, x)
    dw = torch.empty_like(w)
    plan = conv_pointwise.weight_grad_plan(a, src, dw)
    assert plan is not None
    conv_pointwise.pointwise_weight_grad(plan, a, src, dw)
    want = aten.convolution_backward(gy, x, w, None, stride, padding, dilation, transposed,
                                     out_pad, groups, [False, True, False])[1]  # fmt: skip
    torch.testing.assert_close(dw, want, rtol=1e-4, atol=1e-4)
    # spatial dims that do not merge: left to the implicit GEMM
    sliced = _r((2, 20, 10, 6), torch.float32, 10)[:, :, ::2, :]
    assert conv_pointwise._per_image(sliced) is None


def _gpu_tiles(monkeypatch, small: bool) -> None:
    """The GPU's tile choice under the interpreter (tiles stay fp32-converted), shrunk to
    16 where ``small`` so every case runs several row, column and reduction tiles."""
    monkeypatch.setattr(conv, "_INTERPRETING", False)
    monkeypatch.setattr(conv_backward, "_INTERPRETING", False)
    if small:
        for name in ("CONV_BLOCK_M", "CONV_BLOCK_N_MAX", "CONV_BLOCK_K"):
            monkeypatch.setattr(conv, name, 16)
        for name in ("WGRAD_BLOCK_N", "WGRAD_BLOCK_K"):
            monkeypatch.setattr(conv_backward, name, 16)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("case", [c for c in CASES if "pointwise" not in c])
@pytest.mark.parametrize("tiles", ["gpu", "small", "int64"])
def test_gpu_tiles(case: str, dtype: torch.dtype, tiles: str, monkeypatch) -> None:
    """Forward, input and weight gradient under the GPU's tiles (as the H100 runs them),
    under 16-wide tiles (several K steps, column tiles and channel groups per tile edge),
    and with 64-bit offsets forced (the path of tensors past 2^31 elements): strides,
    padding, dilation, groups, transposed, 1-3-D."""
    _gpu_tiles(monkeypatch, small=tiles == "small")
    if tiles == "int64":
        monkeypatch.setattr(conv, "_I32_LIMIT", 0)
    args = _args(case, dtype, bias=True)
    assert_matches(conv.convolution(*args), aten.convolution, *args)
    bargs = _backward_args(case, dtype, [True, True, True])
    assert_matches(conv_backward.convolution_backward(*bargs), aten.convolution_backward, *bargs)


@pytest.mark.slow
@pytest.mark.parametrize("case", ["2d", "2d_depthwise", "2d_groups", "2d_transposed", "3d"])
def test_gpu_tiles_channels_last(case: str, monkeypatch) -> None:
    """The channel-fastest reduction order (channels-last inputs) under small GPU tiles."""
    _gpu_tiles(monkeypatch, small=True)
    args = _backward_args(case, torch.float32, [True, True, True])
    fmt = torch.channels_last if args[1].dim() == 4 else torch.channels_last_3d
    args[:3] = [t.to(memory_format=fmt) for t in args[:3]]
    assert_matches(conv_backward.convolution_backward(*args), aten.convolution_backward, *args)
    fargs = _args(case, torch.float32, bias=True)
    fargs[0] = fargs[0].to(memory_format=fmt)
    assert_matches(conv.convolution(*fargs), aten.convolution, *fargs)


def test_grouped_convolution_stays_on_the_gemm(monkeypatch) -> None:
    calls = launch_grids(monkeypatch, conv, "_depthwise")
    rows = launch_grids(monkeypatch, conv, "_dw_rows")
    args = _args("2d_groups", torch.float32, True)
    assert_matches(conv.convolution(*args), aten.convolution, *args)
    assert len(calls) == len(rows) == 0


@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
@pytest.mark.parametrize("route", ["default", "nhwc"])
@pytest.mark.parametrize("case", list(CASES))
def test_every_path_calls_only_what_the_judge_allows(case: str, route: str, layout: str,
                                                     monkeypatch) -> None:  # fmt: skip
    """Forward and backward of every case, on the default routes and with every dense
    convolution sent to the channels-last GEMM and its weight gradient (``nhwc``), over
    contiguous and channels-last inputs: every ATen call made is one the judge's guard
    allows (views, allocations, copies), none a PyTorch compute op. A held-out 3x3 input
    gradient packed its weight with ``torch.flip`` and failed the judge on an H200
    (2026-11-29); the kernel tests compared values only."""
    from opbench.instrument.observer import DispatchRecorder
    from opbench.judge.guard import classify_calls
    from opbench.kernels._lib import conv_nhwc, conv_nhwc_wgrad

    if route == "nhwc":
        monkeypatch.setattr(conv_nhwc, "NHWC_MIN_CIN", 1)
        monkeypatch.setattr(conv_nhwc, "NHWC_STRIDED_TRANSPOSED", True)
        monkeypatch.setattr(conv_nhwc_wgrad, "NHWC_WGRAD_MIN_CHANNELS", 1)
    args = _args(case, torch.float32, bias=True)
    if layout == "channels_last" and args[0].dim() in (4, 5):
        fmt = torch.channels_last if args[0].dim() == 4 else torch.channels_last_3d
        args[0] = args[0].to(memory_format=fmt)
    with DispatchRecorder() as recorder:
        y = conv.convolution(*args)
    verdict = classify_calls("convolution.default", recorder.calls)
    assert verdict.ok, f"forward: {verdict.violations}"
    x, w, b, stride, padding, dilation, transposed, out_pad, groups = args
    gy = _r(tuple(y.shape), torch.float32, 4)
    bwd = (gy, x, w, [b.shape[0]], stride, padding, dilation, transposed, out_pad, groups,
           [True, True, True])  # fmt: skip
    with DispatchRecorder() as recorder:
        got = conv_backward.convolution_backward(*bwd)
    verdict = classify_calls("convolution_backward.default", recorder.calls)
    assert verdict.ok, f"backward: {verdict.violations}"
    want = aten.convolution_backward(*bwd)
    for g, e in zip(got, want, strict=True):
        torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-4)
