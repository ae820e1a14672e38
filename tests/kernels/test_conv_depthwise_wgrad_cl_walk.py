"""The channels-last depthwise weight gradient's row walk
(``conv_depthwise_wgrad_cl_walk``) against a float64 reference on the CPU (Triton's
interpreter): f16 and bf16, kernels of 3 to 7 taps a side (square and not), paddings,
several channel tiles and the rows split over programs (the GPU's rule, shrunk), 64-bit
offsets; and the calls it leaves to the tap-row kernel. On by default (since its A/B of
2026-12-02); each test turns it on itself, so a change of the default leaves them
testing it."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from kernel_checks import assert_matches, launch_grids  # noqa: E402
from kernel_checks import seeded_randn as _r  # noqa: E402

from opbench.kernels._lib import conv, conv_backward  # noqa: E402
from opbench.kernels._lib import conv_depthwise_wgrad_cl_walk as cl_walk  # noqa: E402
from opbench.kernels._lib import conv_depthwise_wgrad_rows as tap_rows  # noqa: E402

aten = torch.ops.aten


@pytest.fixture
def walk(monkeypatch) -> tuple[list, list]:
    """The walk on; its launches and the tap-row kernel's, from now on."""
    monkeypatch.setattr(cl_walk, "DWG_CL_WALK", True)
    return launch_grids(monkeypatch, cl_walk, "_dwg_cl_walk"), launch_grids(
        monkeypatch, tap_rows, "_dwg_rows"
    )


def _weight_grad(x, w, padding, stride, dtype, seed) -> list:
    """The backward's arguments asking for the weight gradient alone."""
    y = aten.convolution(x, w, None, stride, padding, [1, 1], False, [0, 0], x.shape[1])
    gy = _r(tuple(y.shape), dtype, seed).to(memory_format=torch.channels_last)
    return [gy, x, w, None, stride, padding, [1, 1], False, [0, 0], x.shape[1],
            [False, True, False]]  # fmt: skip


@pytest.mark.parametrize("tiles", ["interpreter", "gpu"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize(
    "kernel, padding",
    [((7, 7), [3, 3]), ((3, 3), [1, 1]), ((5, 3), [0, 1]), ((3, 7), [2, 0])],
    ids=["7x7p3", "3x3p1", "5x3p01", "3x7p20"],
)
def test_walk_weight_gradient(kernel, padding, dtype, tiles, walk, monkeypatch) -> None:
    """ConvNeXt's 7x7 and smaller kernels over 2 images of 9 x 10 and 6 channels: the
    weight gradient runs the walk and matches the reference. ``gpu``: channel tiles of 4
    (two, the second short) and the output rows split 3 ways for 6 programs a kernel row
    (2 where 5 rows a split allow no more: the 5-row kernel's 10 output rows)."""
    if tiles == "gpu":
        monkeypatch.setattr(cl_walk, "_INTERPRETING", False)
        monkeypatch.setattr(cl_walk, "DWG_CL_WALK_BLOCK_C", 4)
        monkeypatch.setattr(cl_walk, "DWG_CL_WALK_MIN_PROGRAMS", 6 * kernel[0])
        monkeypatch.setattr(cl_walk, "DWG_CL_WALK_MIN_ROWS", 5)
    rows, tap = walk
    x = _r((2, 6, 9, 10), dtype, 1).to(memory_format=torch.channels_last)
    w = _r((6, 1, *kernel), dtype, 2)
    args = _weight_grad(x, w, padding, [1, 1], dtype, 3)
    assert_matches(conv_backward.convolution_backward(*args), aten.convolution_backward, *args)
    assert len(rows) == 1 and not tap, (rows, tap)
    if tiles == "gpu":  # kernel rows, channel tiles of 4, the rows' splits
        out_rows = 2 * (9 + 2 * padding[0] - kernel[0] + 1)
        want = min(3, out_rows // 5)  # 6 programs a kernel row, or 5 rows a split
        per = -(-out_rows // want)
        assert rows[0] == (kernel[0], 2, -(-out_rows // per)), rows


def test_walk_with_64_bit_offsets(walk, monkeypatch) -> None:
    monkeypatch.setattr(conv, "_I32_LIMIT", 0)
    rows, _ = walk
    x = _r((1, 4, 6, 5), torch.float16, 4).to(memory_format=torch.channels_last)
    args = _weight_grad(x, _r((4, 1, 3, 3), torch.float16, 5), [1, 1], [1, 1], torch.float16, 6)
    assert_matches(conv_backward.convolution_backward(*args), aten.convolution_backward, *args)
    assert len(rows) == 1


@pytest.mark.parametrize("grads", [(False, True), (True, True)], ids=["weight", "both"])
@pytest.mark.parametrize("mixed", [True, False], ids=["mixed_on", "mixed_off"])
def test_a_channels_last_input_beside_a_contiguous_grad_output(mixed, grads, walk, monkeypatch):
    """``DWG_CL_WALK_MIXED`` (Twins' blocks: a channels-last input, a contiguous
    ``grad_output``): on, ``grad_output`` is copied to channels-last and the walk serves
    the weight gradient, alone or beside the input gradient (whose copies it may share);
    off, another kernel does; both match the reference."""
    monkeypatch.setattr(cl_walk, "DWG_CL_WALK_MIXED", mixed)
    rows, _ = walk
    dtype = torch.float16
    x = _r((2, 6, 9, 10), dtype, 11).to(memory_format=torch.channels_last)
    args = _weight_grad(x, _r((6, 1, 3, 3), dtype, 12), [1, 1], [1, 1], dtype, 13)
    args[0] = args[0].contiguous()
    assert args[0].stride(1) != 1 and x.stride(1) == 1
    args[-1] = [grads[0], grads[1], False]
    assert_matches(conv_backward.convolution_backward(*args), aten.convolution_backward, *args)
    assert len(rows) == (1 if mixed else 0), rows


@pytest.mark.parametrize("case", ["off", "float32", "stride2", "9_wide", "wide_rows"])
def test_calls_the_walk_leaves_to_the_tap_row_kernel(case: str, walk, monkeypatch) -> None:
    """Off; float32 (the tap-row kernel's Kahan sums); strides other than 1; kernels wider
    than 7; output rows wider than ``DWG_CL_WALK_MAX_W``: the tap-row kernel serves them,
    and they match the reference."""
    rows, tap = walk
    dtype, stride, kernel, padding = torch.float16, [1, 1], (3, 3), [1, 1]
    if case == "off":
        monkeypatch.setattr(cl_walk, "DWG_CL_WALK", False)
    elif case == "float32":
        dtype = torch.float32
    elif case == "stride2":
        stride = [2, 2]
    elif case == "9_wide":
        kernel, padding = (3, 9), [1, 4]
    else:
        monkeypatch.setattr(cl_walk, "DWG_CL_WALK_MAX_W", 4)
    x = _r((1, 4, 7, 6), dtype, 7).to(memory_format=torch.channels_last)
    args = _weight_grad(x, _r((4, 1, *kernel), dtype, 8), padding, stride, dtype, 9)
    assert_matches(conv_backward.convolution_backward(*args), aten.convolution_backward, *args)
    assert not rows and tap, (rows, tap)


@pytest.mark.parametrize("elems", [None, 8, 64])
def test_the_warps_hold_a_set_share_of_the_tile(elems, walk, monkeypatch) -> None:
    """``DWG_CL_WALK_THREAD_ELEMS``: a program's warps hold that many elements of its
    ``[BLOCK_W, BLOCK_C]`` tile a thread (1 to 8 warps); None: ``DWG_CL_WALK_WARPS``. Under
    the GPU's tiles a 20-wide row of 6 channels (32 x 8) takes 1 warp at 8 elements a
    thread, and still matches the reference."""
    from kernel_checks import launch_constants

    monkeypatch.setattr(cl_walk, "DWG_CL_WALK_THREAD_ELEMS", elems)
    monkeypatch.setattr(cl_walk, "_INTERPRETING", False)
    warps = launch_constants(monkeypatch, [(cl_walk, "_dwg_cl_walk")], "num_warps")
    x = _r((2, 6, 5, 20), torch.float16, 4).to(memory_format=torch.channels_last)
    w = _r((6, 1, 3, 3), torch.float16, 5)
    args = _weight_grad(x, w, [1, 1], [1, 1], torch.float16, 6)
    assert_matches(conv_backward.convolution_backward(*args), aten.convolution_backward, *args)
    assert warps == [{None: cl_walk.DWG_CL_WALK_WARPS, 8: 1, 64: 1}[elems]], warps
    assert cl_walk.cl_walk_warps(64, 32) == {None: cl_walk.DWG_CL_WALK_WARPS, 8: 8, 64: 1}[elems]
    assert cl_walk.cl_walk_warps(16, 64) == {None: cl_walk.DWG_CL_WALK_WARPS, 8: 4, 64: 1}[elems]


@pytest.mark.parametrize("view", ["dense", "slice"])
def test_walk_with_channel_runs(view: str, walk, monkeypatch) -> None:
    """``DWG_CL_WALK_ALIGN_RUNS``: 24 channels (runs of 8), dense or a channel slice of a
    72-channel tensor (CoaT's layout), under the GPU's tiles (16 channels: the second tile
    half masked; the rows split): each launch says ``ALIGN=8`` and the gradient matches
    the reference; off, ``ALIGN=1``."""
    from kernel_checks import launch_constants

    monkeypatch.setattr(cl_walk, "_INTERPRETING", False)
    monkeypatch.setattr(cl_walk, "DWG_CL_WALK_BLOCK_C", 16)
    monkeypatch.setattr(cl_walk, "DWG_CL_WALK_MIN_PROGRAMS", 10)
    monkeypatch.setattr(cl_walk, "DWG_CL_WALK_MIN_ROWS", 4)
    monkeypatch.setattr(cl_walk, "DWG_CL_WALK_ALIGN_RUNS", True)
    aligns = launch_constants(monkeypatch, [(cl_walk, "_dwg_cl_walk")], "ALIGN")
    rows, tap = walk
    x = _r((2, 24 if view == "dense" else 72, 8, 9), torch.float16, 7)
    x = x.to(memory_format=torch.channels_last)
    x = x if view == "dense" else x[:, 24:48]
    w = _r((24, 1, 5, 5), torch.float16, 8)
    args = _weight_grad(x, w, [2, 2], [1, 1], torch.float16, 9)
    assert_matches(conv_backward.convolution_backward(*args), aten.convolution_backward, *args)
    assert aligns == [8] and len(rows) == 1 and not tap, (aligns, rows, tap)
    monkeypatch.setattr(cl_walk, "DWG_CL_WALK_ALIGN_RUNS", False)
    assert_matches(conv_backward.convolution_backward(*args), aten.convolution_backward, *args)
    assert aligns[1:] == [1], aligns
