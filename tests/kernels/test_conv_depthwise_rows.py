"""The NCHW 3x3 depthwise row walk (``conv_depthwise_rows``) against eager PyTorch and a
float64 reference on the CPU (Triton's interpreter): the forward at strides 1 and 2 along
each axis, the input gradient of unit stride (the taps reversed), padding 0-2, bias,
16-bit dtypes, strided and sliced inputs, the GPU's tiles (several plane, column and row
tiles, uneven), 64-bit offsets; and the calls it must leave to the gather kernel."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from kernel_checks import assert_matches, launch_grids  # noqa: E402
from kernel_checks import seeded_randn as _r  # noqa: E402

from opbench.kernels._lib import (  # noqa: E402
    conv,
    conv_backward,
    conv_depthwise_cl_rows,
    conv_depthwise_rows,
)

aten = torch.ops.aten


def _launches(monkeypatch) -> tuple[list, list]:
    """The row walk's launches and the gather kernel's, from now on."""
    return launch_grids(monkeypatch, conv, "_dw_rows"), launch_grids(
        monkeypatch, conv, "_depthwise"
    )


def _gpu_tiles(monkeypatch, big: bool = False) -> None:
    """The GPU's tile choice under the interpreter, shrunk: 16 columns (so 19 need two
    column tiles), one plane a program, strips of 4 rows (9 rows: 3 strips, the last
    short; the grid fill, which would halve them, off: its own test below); ``big``:
    64-bit offsets forced."""
    monkeypatch.setattr(conv_depthwise_rows, "_INTERPRETING", False)
    monkeypatch.setattr(conv_depthwise_rows, "DW_ROWS_MIN_PROGRAMS", 0)
    monkeypatch.setattr(conv_depthwise_rows, "DW_ROWS_TILE", 16)
    monkeypatch.setattr(conv_depthwise_rows, "DW_ROWS_STRIP", 4)
    if big:
        monkeypatch.setattr(conv, "_I32_LIMIT", 0)


def _both_ways(x, w, b, stride, padding, dtype, seed) -> None:
    """Forward, then the input gradient of the same convolution, each against eager."""
    args = [x, w, b, stride, padding, [1, 1], False, [0, 0], x.shape[1]]
    got = conv.convolution(*args)
    eager = aten.convolution(*args)
    assert got.shape == eager.shape and got.stride() == eager.stride()
    assert_matches(got, aten.convolution, *args)
    gy = _r(tuple(eager.shape), dtype, seed)
    bargs = [gy, x, w, None, stride, padding, [1, 1], False, [0, 0], x.shape[1],
             [True, False, False]]  # fmt: skip
    assert_matches(conv_backward.convolution_backward(*bargs), aten.convolution_backward, *bargs)


@pytest.mark.parametrize("tiles", ["interpreter", "gpu"])
@pytest.mark.parametrize("padding", [[1, 1], [0, 0], [2, 1]], ids=["p1", "p0", "p21"])
@pytest.mark.parametrize("stride", [[1, 1], [2, 2], [1, 2], [2, 1]], ids=str)
def test_row_walk_forward_and_input_gradient(stride, padding, tiles, monkeypatch) -> None:
    """Every stride and padding the walk serves, 9 x 19 planes (odd width), 5 channels
    over 2 images, with a bias: the forward launches the walk; the input gradient does
    where the forward's stride is 1 (a transposed convolution of unit stride), else the
    gather kernel."""
    if tiles == "gpu":
        _gpu_tiles(monkeypatch)
    rows, gather = _launches(monkeypatch)
    x, w, b = (
        _r((2, 5, 9, 19), torch.float32, 1),
        _r((5, 1, 3, 3), torch.float32, 2),
        _r((5,), torch.float32, 3),
    )
    _both_ways(x, w, b, stride, padding, torch.float32, 4)
    unit = stride == [1, 1]
    assert len(rows) == 1 + unit and len(gather) == (not unit), (rows, gather)
    if tiles == "gpu":  # planes, column tiles of 16, strips of 4 rows
        out_h = (9 + 2 * padding[0] - 3) // stride[0] + 1
        out_w = (19 + 2 * padding[1] - 3) // stride[1] + 1
        assert rows[0] == (10, -(-out_w // 16), -(-out_h // 4))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_row_walk_16_bit(dtype: torch.dtype) -> None:
    """16-bit inputs, accumulated in fp32 and rounded once: within the judge's bounds of
    eager and the float64 reference, without a bias."""
    x, w = _r((2, 6, 11, 11), dtype, 5), _r((6, 1, 3, 3), dtype, 6)
    _both_ways(x, w, None, [1, 1], [1, 1], dtype, 7)


@pytest.mark.parametrize("view", ["width-strided", "channel-slice", "int64"])
def test_row_walk_views_and_64_bit(view: str, monkeypatch) -> None:
    """Strides the walk reads as given: every other column of a wider tensor (a last
    stride of 2), 5 channels sliced from 8 (planes not in one run); and 64-bit offsets
    forced under the GPU's tiles."""
    if view == "int64":
        _gpu_tiles(monkeypatch, big=True)
    rows, _ = _launches(monkeypatch)
    base = _r((2, 8, 9, 26), torch.float32, 8)
    x = {"width-strided": base[:, :5, :, ::2], "channel-slice": base[:, 2:7, :, :13],
         "int64": base[:, :5, :, :13].contiguous()}[view]  # fmt: skip
    w, b = _r((5, 1, 3, 3), torch.float32, 9), _r((5,), torch.float32, 10)
    _both_ways(x, w, b, [1, 1], [1, 1], torch.float32, 11)
    assert len(rows) == 2


@pytest.mark.parametrize(
    "case",
    ["channels_last", "5x5", "dilated", "multiplier", "transposed_stride2", "1d", "narrow",
     "off"],
)  # fmt: skip
def test_row_walk_leaves_the_rest_to_the_gather_kernel(case: str, monkeypatch) -> None:
    """Calls outside the walk's cases take the gather kernel, still right: channels-last
    inputs (with their own walk, ``DW_CL_ROWS``, off), a 5x5 kernel, dilation 2, a channel multiplier of 2, a transposed convolution
    of stride 2, 1-D planes, an output 8 wide (below ``DW_ROWS_MIN_WIDTH``); and every
    call with ``DW_ROWS`` off."""
    rows, gather = _launches(monkeypatch)
    x, w = _r((2, 4, 9, 10), torch.float32, 12), _r((4, 1, 3, 3), torch.float32, 13)
    stride, padding, dilation, transposed, groups = [1, 1], [1, 1], [1, 1], False, 4
    out_pad = [0, 0]
    if case == "channels_last":  # the channels-last walk would take it first
        x = x.to(memory_format=torch.channels_last)
        monkeypatch.setattr(conv_depthwise_cl_rows, "DW_CL_ROWS", False)
    elif case == "5x5":
        w = _r((4, 1, 5, 5), torch.float32, 14)
    elif case == "dilated":
        dilation = [2, 2]
    elif case == "multiplier":
        w = _r((8, 1, 3, 3), torch.float32, 15)
    elif case == "transposed_stride2":
        stride, transposed, out_pad = [2, 2], True, [1, 1]
    elif case == "narrow":
        x = x[..., :8]
    elif case == "1d":
        x, w = x[:, :, 0], w[:, :, 0]
        stride, padding, dilation, out_pad = [1], [1], [1], [0]
    else:
        monkeypatch.setattr(conv_depthwise_rows, "DW_ROWS", False)
    args = [x, w, None, stride, padding, dilation, transposed, out_pad, groups]
    assert_matches(conv.convolution(*args), aten.convolution, *args)
    assert (len(rows), len(gather)) == (0, 1)


def test_row_walk_setting_makes_a_new_plan(monkeypatch) -> None:
    """A call's kept plan follows ``DW_ROWS``: the same call launches the walk, then,
    with the setting off, the gather kernel, then the walk again."""
    rows, gather = _launches(monkeypatch)
    x, w = _r((1, 3, 7, 9), torch.float32, 16), _r((3, 1, 3, 3), torch.float32, 17)
    args = [x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 3]
    conv.convolution(*args)
    monkeypatch.setattr(conv_depthwise_rows, "DW_ROWS", False)
    conv.convolution(*args)
    monkeypatch.setattr(conv_depthwise_rows, "DW_ROWS", True)
    assert_matches(conv.convolution(*args), aten.convolution, *args)
    assert (len(rows), len(gather)) == (2, 1)


@pytest.mark.parametrize("fill", [0, 64], ids=["off", "fill"])
def test_row_walk_fills_a_small_grid(fill: int, monkeypatch) -> None:
    """``DW_ROWS_MIN_PROGRAMS``: one image of 3 channels, 9 x 10 planes under the GPU's
    tiles (one plane a program, strips of 4 rows: 3 x 1 x 3 programs) has its strips
    halved until the grid has 64 programs or a strip is one row (9 strips: 27); off, the
    strips stay. Eager's result either way."""
    _gpu_tiles(monkeypatch)
    monkeypatch.setattr(conv_depthwise_rows, "DW_ROWS_MIN_PROGRAMS", fill)
    rows, _ = _launches(monkeypatch)
    x, w = _r((1, 3, 9, 10), torch.float32, 18), _r((3, 1, 3, 3), torch.float32, 19)
    args = [x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 3]
    assert_matches(conv.convolution(*args), aten.convolution, *args)
    assert rows == [(3, 1, 9 if fill else 3)], rows


@pytest.mark.parametrize(
    "strip,rows,per_strip,least",
    [(16, 56, 4, 264), (16, 56, 100, 264), (16, 56, 1000, 264), (8, 7, 2, 64), (1, 9, 1, 99)],
)
def test_strips_halve_until_the_grid_is_full_or_a_row_each(strip, rows, per_strip, least):
    """``fill_strips``: the longest strip of ``strip``, ``strip / 2``, ... (rounded up)
    whose grid reaches ``least`` programs, else one row a program; never longer than
    asked."""
    from opbench.kernels._lib.launch import cdiv

    got = conv_depthwise_rows.fill_strips(strip, rows, per_strip, least)
    tried = [strip]
    while tried[-1] > 1:
        tried.append(cdiv(tried[-1], 2))
    full = [s for s in tried if per_strip * cdiv(rows, s) >= least]
    assert got == (full[0] if full else 1), (got, tried)
