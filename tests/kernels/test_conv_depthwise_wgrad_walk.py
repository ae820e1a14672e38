"""The NCHW 3x3 depthwise weight gradient as a row walk (``conv_depthwise_wgrad_walk``,
on here: ``DWG_WALK``) against eager PyTorch and a float64 reference on the CPU (Triton's
interpreter): strides 1 and 2 along each axis, padding 0-2, both 16-bit dtypes, one image
(the partials written straight into the gradient) and several (summed in a fixed order),
the GPU's tiles (uneven plane, column and row tiles) and 64-bit offsets; and the calls it
leaves to the other kernels."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from kernel_checks import assert_matches, launch_grids  # noqa: E402
from kernel_checks import seeded_randn as _r  # noqa: E402

from opbench.kernels._lib import conv, conv_backward  # noqa: E402
from opbench.kernels._lib import conv_depthwise_wgrad_walk as walk  # noqa: E402

aten = torch.ops.aten


def _weight_grad(x, w, stride, padding, seed) -> None:
    """The weight gradient alone (output mask ``[False, True, False]``) against eager."""
    y = aten.convolution(x, w, None, stride, padding, [1, 1], False, [0, 0], x.shape[1])
    gy = _r(tuple(y.shape), x.dtype, seed)
    args = [gy, x, w, None, stride, padding, [1, 1], False, [0, 0], x.shape[1],
            [False, True, False]]  # fmt: skip
    assert_matches(conv_backward.convolution_backward(*args), aten.convolution_backward, *args)


@pytest.mark.parametrize("tiles", ["interpreter", "gpu", "int64"])
@pytest.mark.parametrize("images", [1, 2])
@pytest.mark.parametrize("padding", [[1, 1], [0, 0], [2, 1]], ids=["p1", "p0", "p21"])
@pytest.mark.parametrize("stride", [[1, 1], [2, 2], [1, 2], [2, 1]], ids=str)
def test_walk_weight_gradient(stride, padding, images, tiles, monkeypatch) -> None:
    """9 x 19 planes of 5 channels: under the interpreter's tiles one program a plane
    block, one split an image; under the GPU's (16 columns, strips of 4 rows, one plane a
    program) several column tiles and strips, their partials summed."""
    monkeypatch.setattr(walk, "DWG_WALK", True)
    if tiles != "interpreter":
        monkeypatch.setattr(walk, "_INTERPRETING", False)
        monkeypatch.setattr(walk, "DWG_WALK_TILE", 16)
        monkeypatch.setattr(walk, "DWG_WALK_STRIP", 4)
    if tiles == "int64":
        monkeypatch.setattr(conv, "_I32_LIMIT", 0)
    grids = launch_grids(monkeypatch, walk, "_dwg_walk")
    x, w = _r((images, 5, 9, 19), torch.float16, 1), _r((5, 1, 3, 3), torch.float16, 2)
    _weight_grad(x, w, stride, padding, 3)
    assert len(grids) == 1, grids
    if tiles != "interpreter":
        out_h = (9 + 2 * padding[0] - 3) // stride[0] + 1
        out_w = (19 + 2 * padding[1] - 3) // stride[1] + 1
        assert grids[0] == (images * 5, -(-out_w // 16), -(-out_h // 4)), grids


def test_walk_weight_gradient_bf16() -> None:
    """bfloat16, 11 x 11 planes of 6 channels over 3 images."""
    walk_on = walk.DWG_WALK
    try:
        walk.DWG_WALK = True
        x, w = _r((3, 6, 11, 11), torch.bfloat16, 4), _r((6, 1, 3, 3), torch.bfloat16, 5)
        _weight_grad(x, w, [1, 1], [1, 1], 6)
    finally:
        walk.DWG_WALK = walk_on


@pytest.mark.parametrize("case", ["off", "float32", "narrow", "5x5", "dilated", "channels_last"])
def test_walk_leaves_the_rest(case: str, monkeypatch) -> None:
    """Calls outside the walk's cases take the other kernels, still right: the setting
    off, float32, an output 8 wide, a 5x5 kernel, dilation 2, channels-last operands."""
    monkeypatch.setattr(walk, "DWG_WALK", case != "off")
    grids = launch_grids(monkeypatch, walk, "_dwg_walk")
    dtype = torch.float32 if case == "float32" else torch.float16
    x, w = _r((2, 4, 9, 12), dtype, 7), _r((4, 1, 3, 3), dtype, 8)
    dilation = [2, 2] if case == "dilated" else [1, 1]
    if case == "narrow":
        x = x[..., :8]
    elif case == "5x5":
        w = _r((4, 1, 5, 5), dtype, 9)
    elif case == "channels_last":
        x = x.to(memory_format=torch.channels_last)
    y = aten.convolution(x, w, None, [1, 1], [1, 1], dilation, False, [0, 0], 4)
    gy = _r(tuple(y.shape), dtype, 10)
    if case == "channels_last":
        gy = gy.to(memory_format=torch.channels_last)
    args = [gy, x, w, None, [1, 1], [1, 1], dilation, False, [0, 0], 4, [False, True, False]]
    assert_matches(conv_backward.convolution_backward(*args), aten.convolution_backward, *args)
    assert grids == []
