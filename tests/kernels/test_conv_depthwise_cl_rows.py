"""The channels-last depthwise row walk (``conv_depthwise_cl_rows``) against eager PyTorch
and a float64 reference on the CPU (Triton's interpreter): kernels of 3 to 7 taps a side
(square and not), padding 0 to k - 1 and uneven, bias, 16-bit dtypes, the input gradient
of a unit-stride convolution (the taps reversed), the GPU's tiles (several column,
channel and row tiles, each uneven), 64-bit offsets; and the calls it must leave to the
gather kernel. The walk is on by default (since its A/B of 2026-12-02); each test turns
it on itself, so a change of the default leaves them testing it."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from kernel_checks import assert_matches, launch_grids  # noqa: E402
from kernel_checks import seeded_randn as _r  # noqa: E402

from opbench.kernels._lib import conv, conv_backward, conv_depthwise_cl_rows  # noqa: E402

aten = torch.ops.aten


@pytest.fixture
def walk(monkeypatch) -> tuple[list, list]:
    """The walk on; its launches and the gather kernel's, from now on."""
    monkeypatch.setattr(conv_depthwise_cl_rows, "DW_CL_ROWS", True)
    return launch_grids(monkeypatch, conv, "_dw_cl_rows"), launch_grids(
        monkeypatch, conv, "_depthwise"
    )


def _gpu_tiles(monkeypatch, big: bool = False) -> None:
    """The GPU's tile choice under the interpreter, shrunk: 8 columns, 4 channels and
    strips of 5 rows (so 9 x 10 outputs of 6 channels take 2 column, 2 channel and 2 row
    tiles, the last of each short; the grid fill, which halves strips, off); ``big``:
    64-bit offsets forced."""
    monkeypatch.setattr(conv_depthwise_cl_rows, "_INTERPRETING", False)
    monkeypatch.setattr(conv_depthwise_cl_rows, "DW_CL_ROWS_MIN_PROGRAMS", 0)
    monkeypatch.setattr(conv_depthwise_cl_rows, "DW_CL_ROWS_BLOCK_W", 8)
    monkeypatch.setattr(conv_depthwise_cl_rows, "DW_CL_ROWS_BLOCK_C", 4)
    monkeypatch.setattr(conv_depthwise_cl_rows, "DW_CL_ROWS_STRIP", 5)
    if big:
        monkeypatch.setattr(conv, "_I32_LIMIT", 0)


def _cl(t: torch.Tensor) -> torch.Tensor:
    return t.to(memory_format=torch.channels_last)


def _both_ways(x, w, b, padding, dtype, seed) -> None:
    """Forward, then the input gradient of the same convolution, each against eager (the
    output's strides too)."""
    args = [x, w, b, [1, 1], padding, [1, 1], False, [0, 0], x.shape[1]]
    got = conv.convolution(*args)
    eager = aten.convolution(*args)
    assert got.shape == eager.shape and got.stride() == eager.stride()
    assert_matches(got, aten.convolution, *args)
    gy = _cl(_r(tuple(eager.shape), dtype, seed))
    bargs = [gy, x, w, None, [1, 1], padding, [1, 1], False, [0, 0], x.shape[1],
             [True, False, False]]  # fmt: skip
    assert_matches(conv_backward.convolution_backward(*bargs), aten.convolution_backward, *bargs)


@pytest.mark.parametrize("tiles", ["interpreter", "gpu"])
@pytest.mark.parametrize(
    "kernel, padding",
    [((7, 7), [3, 3]), ((3, 3), [1, 1]), ((5, 5), [0, 0]), ((3, 5), [1, 2]), ((7, 3), [2, 0])],
    ids=["7x7p3", "3x3p1", "5x5p0", "3x5p12", "7x3p20"],
)
def test_walk_forward_and_input_gradient(kernel, padding, tiles, walk, monkeypatch) -> None:
    """ConvNeXt's 7x7 and smaller kernels, square and not, padded to keep the size, less
    and not at all, over 2 images of 9 x 10 and 6 channels with a bias: the forward and
    the input gradient both launch the walk, never the gather kernel."""
    if tiles == "gpu":
        _gpu_tiles(monkeypatch)
    rows, gather = walk
    x = _cl(_r((2, 6, 9, 10), torch.float32, 1))
    w, b = _r((6, 1, *kernel), torch.float32, 2), _r((6,), torch.float32, 3)
    _both_ways(x, w, b, padding, torch.float32, 4)
    assert len(rows) == 2 and not gather, (rows, gather)
    if tiles == "gpu":  # channel tiles of 4, column tiles of 8, images x strips of 5 rows
        out_h = 9 + 2 * padding[0] - kernel[0] + 1
        out_w = 10 + 2 * padding[1] - kernel[1] + 1
        assert rows[0] == (2, -(-out_w // 8), 2 * -(-out_h // 5)), rows


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_walk_in_16_bit_without_bias(dtype: torch.dtype, walk, monkeypatch) -> None:
    """16-bit inputs accumulate in fp32 and round once (eager's CPU kernels do too); no
    bias."""
    rows, _ = walk
    x, w = _cl(_r((1, 5, 8, 7), dtype, 5)), _r((5, 1, 7, 7), dtype, 6)
    _both_ways(x, w, None, [3, 3], dtype, 7)
    assert len(rows) == 2


def test_walk_with_64_bit_offsets(walk, monkeypatch) -> None:
    _gpu_tiles(monkeypatch, big=True)
    rows, _ = walk
    x, w = _cl(_r((2, 6, 5, 6), torch.float32, 8)), _r((6, 1, 3, 3), torch.float32, 9)
    _both_ways(x, w, _r((6,), torch.float32, 10), [1, 1], torch.float32, 11)
    assert len(rows) == 2


@pytest.mark.parametrize("view", ["dense", "slice"])
def test_walk_with_channel_runs(view: str, walk, monkeypatch) -> None:
    """``DW_CL_ROWS_ALIGN_RUNS``: 24 channels (runs of 8), dense or a channel slice of a
    72-channel tensor as CoaT's are (position strides 72 and 720: runs of 8 too), under
    the GPU's tiles of 16 channels (the second tile half masked): each launch says
    ``ALIGN=8``, and forward and input gradient match eager; off, ``ALIGN=1``."""
    from kernel_checks import launch_constants

    _gpu_tiles(monkeypatch)
    monkeypatch.setattr(conv_depthwise_cl_rows, "DW_CL_ROWS_BLOCK_C", 16)
    monkeypatch.setattr(conv_depthwise_cl_rows, "DW_CL_ROWS_ALIGN_RUNS", True)
    aligns = launch_constants(monkeypatch, [(conv, "_dw_cl_rows")], "ALIGN")
    rows, _ = walk
    x = _cl(_r((2, 24 if view == "dense" else 72, 9, 10), torch.float16, 16))
    x = x if view == "dense" else x[:, 24:48]
    w, b = _r((24, 1, 5, 5), torch.float16, 17), _r((24,), torch.float16, 18)
    _both_ways(x, w, b, [2, 2], torch.float16, 19)
    assert len(rows) == 2 and aligns == [8, 8], (rows, aligns)
    monkeypatch.setattr(conv_depthwise_cl_rows, "DW_CL_ROWS_ALIGN_RUNS", False)
    _both_ways(x, w, b, [2, 2], torch.float16, 19)
    assert aligns[2:] == [1, 1], aligns


def test_a_small_grid_walks_shorter_strips(walk, monkeypatch) -> None:
    """With the grid fill on, strips halve until the grid holds the programs asked for
    (here 2 x 2 x 1 image: strips of 8 rows -> 1 row, 8 programs a tile), and the result
    still matches."""
    monkeypatch.setattr(conv_depthwise_cl_rows, "_INTERPRETING", False)
    monkeypatch.setattr(conv_depthwise_cl_rows, "DW_CL_ROWS_BLOCK_W", 4)
    monkeypatch.setattr(conv_depthwise_cl_rows, "DW_CL_ROWS_BLOCK_C", 4)
    monkeypatch.setattr(conv_depthwise_cl_rows, "DW_CL_ROWS_STRIP", 8)
    monkeypatch.setattr(conv_depthwise_cl_rows, "DW_CL_ROWS_MIN_PROGRAMS", 32)
    rows, _ = walk
    x, w = _cl(_r((1, 8, 8, 8), torch.float32, 12)), _r((8, 1, 3, 3), torch.float32, 13)
    args = [x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 8]
    assert_matches(conv.convolution(*args), aten.convolution, *args)
    assert rows == [(2, 2, 8)], rows


@pytest.mark.parametrize(
    "case",
    ["off", "nchw", "stride2", "dilated", "9x9", "multiplier", "3d", "short"],
)
def test_calls_the_walk_leaves_to_the_gather_kernel(case: str, walk, monkeypatch) -> None:
    """Off; NCHW inputs (the NCHW walk's or the gather's); strides and dilations other than
    1; kernels wider than 7; a channel multiplier; 3-D; a plane of fewer output rows than
    ``DW_CL_ROWS_MIN_HEIGHT_OVER_K`` kernel heights (7 rows, 5x5, at 2): the gather kernel
    serves them, and they match eager."""
    rows, gather = walk
    x = _cl(_r((1, 4, 9, 9), torch.float32, 14))
    w = _r((4, 1, 3, 3), torch.float32, 15)
    stride, dilation, groups = [1, 1], [1, 1], 4
    if case == "off":
        monkeypatch.setattr(conv_depthwise_cl_rows, "DW_CL_ROWS", False)
    elif case == "nchw":
        x = x.contiguous()
        w = _r((4, 1, 5, 5), torch.float32, 15)  # not 3x3: the NCHW walk passes it on
    elif case == "stride2":
        stride = [2, 2]
    elif case == "dilated":
        dilation = [2, 1]
    elif case == "9x9":
        w = _r((4, 1, 9, 9), torch.float32, 15)
    elif case == "multiplier":
        w = _r((8, 1, 3, 3), torch.float32, 15)
    elif case == "short":
        monkeypatch.setattr(conv_depthwise_cl_rows, "DW_CL_ROWS_MIN_HEIGHT_OVER_K", 2)
        w = _r((4, 1, 5, 5), torch.float32, 15)
    else:
        x = _r((1, 4, 3, 5, 5), torch.float32, 14).to(memory_format=torch.channels_last_3d)
        w = _r((4, 1, 3, 3, 3), torch.float32, 15)
        stride, dilation = [1, 1, 1], [1, 1, 1]
    pad = [1] * len(stride)
    args = [x, w, None, stride, pad, dilation, False, [0] * len(stride), groups]
    assert_matches(conv.convolution(*args), aten.convolution, *args)
    assert not rows and gather, (rows, gather)
