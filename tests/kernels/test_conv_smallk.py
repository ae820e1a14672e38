"""The flattened-reduction convolution kernel (``conv_smallk``: few channels a group, NCHW)
against eager PyTorch and a float64 reference under Triton's interpreter: which
convolutions take it, and forward and input gradient under the GPU's tile choice (as
the H100 runs it), under 16-wide tiles (several row, column and reduction steps, the
reduction's last step part padding) and with 64-bit offsets forced."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from kernel_checks import assert_matches  # noqa: E402
from kernel_checks import seeded_randn as _r

from opbench.kernels._lib import (
    conv,  # noqa: E402
    conv_backward,  # noqa: E402
)

aten = torch.ops.aten

# name: (input shape, weight shape, stride, padding, dilation, transposed, output_padding,
# groups, takes the kernel (forward, input gradient))
CASES = {
    # HRNet's 3x3 over 18 channels (162 pairs: 11 steps of 16, the last 2 of 16 real);
    # an output 16 wide: runs of 8 positions
    "2d_18ch": ((2, 18, 6, 16), (18, 18, 3, 3), [1, 1], [1, 1], [1, 1], False, [0, 0], 1,
                (True, True)),
    # ResNeXt's groups of 8 channels (16 out a group); odd width: no runs
    "2d_groups_of_8": ((2, 32, 5, 7), (64, 8, 3, 3), [1, 1], [1, 1], [1, 1], False, [0, 0], 4,
                       (True, True)),
    "2d_stride2_dilated": ((2, 5, 11, 12), (7, 5, 3, 3), [2, 2], [2, 1], [2, 1], False, [0, 0],
                           1, (True, False)),
    "2d_asymmetric": ((1, 5, 10, 7), (7, 5, 2, 3), [2, 1], [0, 2], [1, 2], False, [0, 0], 1,
                      (True, False)),
    "1d": ((2, 3, 11), (5, 3, 3), [1], [1], [1], False, [0], 1, (True, True)),
    "3d": ((1, 2, 5, 6, 8), (3, 2, 2, 3, 3), [1, 1, 1], [1, 0, 1], [1, 1, 2], False, [0, 0, 0],
           1, (True, True)),
    "2d_transposed_unit_stride": ((2, 3, 5, 4), (3, 5, 3, 2), [1, 1], [1, 0], [1, 2], True,
                                  [0, 0], 1, (True, True)),
    "2d_transposed_groups_unit_stride": ((1, 4, 5, 8), (4, 3, 3, 3), [1, 1], [1, 1], [1, 1],
                                         True, [0, 0], 2, (True, True)),
    # a strided transposed convolution stays on conv_kernels; its input gradient is a
    # strided forward convolution, which takes the kernel
    "2d_transposed_strided": ((2, 3, 5, 4), (3, 5, 3, 2), [2, 3], [1, 0], [1, 2], True, [1, 2],
                              1, (False, True)),
}  # fmt: skip


def _args(case: str, dtype: torch.dtype) -> list:
    shape, wshape, stride, padding, dilation, transposed, out_pad, groups, _ = CASES[case]
    c_out = wshape[1] * groups if transposed else wshape[0]
    return [_r(shape, dtype, 1), _r(wshape, dtype, 2), _r((c_out,), dtype, 3), stride, padding,
            dilation, transposed, out_pad, groups]  # fmt: skip


def _count(monkeypatch) -> list[int]:
    calls = [0]
    launch = conv._smallk

    def counted(*a, **k):
        calls[0] += 1
        return launch(*a, **k)

    monkeypatch.setattr(conv, "_smallk", counted)
    return calls


def _tiles(monkeypatch, tiles: str) -> None:
    if tiles == "interpreter":
        return
    monkeypatch.setattr(conv, "_INTERPRETING", False)
    if tiles in ("small", "int64"):
        for name in ("SMALLK_BLOCK_M", "SMALLK_BLOCK_N_MAX", "SMALLK_BLOCK_K"):
            monkeypatch.setattr(conv, name, 16)
    if tiles == "int64":
        monkeypatch.setattr(conv, "_I32_LIMIT", 0)


def _check(case: str, dtype: torch.dtype, monkeypatch) -> None:
    calls = _count(monkeypatch)
    args = _args(case, dtype)
    fwd, grad_in = CASES[case][-1]
    got = conv.convolution(*args)
    assert calls[0] == int(fwd)
    assert got.stride() == aten.convolution(*args).stride()
    assert_matches(got, aten.convolution, *args)
    x, w, b, *rest = args
    gy = _r(tuple(got.shape), dtype, 6)
    bargs = [gy, x, w, [b.numel()], *rest, [True, False, False]]
    assert_matches(conv_backward.convolution_backward(*bargs), aten.convolution_backward, *bargs)
    assert calls[0] == int(fwd) + int(grad_in)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", list(CASES))
def test_smallk(case: str, dtype: torch.dtype, monkeypatch) -> None:
    _check(case, dtype, monkeypatch)


@pytest.mark.parametrize("tiles", ["gpu", "small", "int64"])
@pytest.mark.parametrize("case", list(CASES))
def test_smallk_gpu_tiles(case: str, tiles: str, monkeypatch) -> None:
    _tiles(monkeypatch, tiles)
    _check(case, torch.float16 if tiles == "small" else torch.float32, monkeypatch)


def test_smallk_declines() -> None:
    """Channels innermost, long reductions, kernels past 31 positions and strided
    transposed convolutions stay on ``conv_kernels``; runs of neighbouring positions only
    where every stride is 1 and the width splits into them."""
    x = _r((1, 4, 6, 6), torch.float32, 1)
    w = _r((4, 4, 3, 3), torch.float32, 2)
    y = torch.empty((1, 4, 6, 6))
    x5, w5, y5 = (t.unsqueeze(2) for t in (x, w, y))
    unit = ([1, 1, 1], [0, 1, 1], [1, 1, 1])
    cl = x.to(memory_format=torch.channels_last).unsqueeze(2)
    assert not conv._smallk_forward(cl, w5, None, y5, 4, 4, 1, *unit, False, False)
    big = _r((4, 200, 3, 3), torch.float32, 2).unsqueeze(2)
    assert not conv._smallk_forward(x5, big, None, y5, 200, 4, 1, *unit, False, False)
    w77 = _r((4, 4, 1, 7, 7), torch.float32, 2)
    assert not conv._smallk_forward(x5, w77, None, y5, 4, 4, 1, *unit, False, False)
    assert not conv._smallk_forward(x5, w5, None, y5, 4, 4, 1, [1, 2, 2], [0, 1, 1],
                                    [1, 1, 1], True, False)  # fmt: skip
    assert conv._run_of_positions(56, 128, True, True) == 8
    assert conv._run_of_positions(14, 128, True, True) == 2
    assert conv._run_of_positions(7, 128, True, True) == 1
    assert conv._run_of_positions(56, 128, True, False) == 1


def test_fill_rows_cuts_tiles_until_the_grid_fills_the_gpu(monkeypatch) -> None:
    """A convolution's tile rows halve, to ``MIN_BLOCK_M`` at least, while its grid leaves
    multiprocessors idle; one that fills them, or a tile already under the floor, keeps
    its tile. A floor at the tiles' own 128 turns the rule off."""
    floor = conv.MIN_BLOCK_M
    assert 16 <= floor < conv.SMALLK_BLOCK_M
    assert conv.fill_rows(32 * 56 * 56, 1, 128, 132) == 128  # 784 programs
    assert conv.fill_rows(2 * 16 * 16, 1, 128, 132) == floor  # ResNet's stem: 4 programs
    assert conv.fill_rows(4096, 4, 128, 132) == 64  # 32 x 4 programs < 132 <= 64 x 4
    assert conv.fill_rows(4096, 200, 128, 132) == 128  # the channels fill it
    assert conv.fill_rows(512, 1, 16, 132) == 16
    # the forward kernels take it on the GPU: flattened reduction, NCHW implicit GEMM (its
    # channels-last tiles stay: untimed under the rule)
    monkeypatch.setattr(conv, "_INTERPRETING", False)
    assert conv._blocks(512, 16, 8, True, 1, 132)[0] == floor
    assert conv._blocks(512, 16, 8, False, 1, 132)[0] == conv.CONV_BLOCK_M_CL
    assert conv._smallk_blocks(512, 16, 72, 1, 132)[0] == floor
    assert conv._smallk_blocks(32 * 56 * 56, 16, 72, 1, 132)[0] == conv.SMALLK_BLOCK_M
    monkeypatch.setattr(conv, "MIN_BLOCK_M", 128)
    assert conv._smallk_blocks(512, 16, 72, 1, 132)[0] == conv.SMALLK_BLOCK_M
