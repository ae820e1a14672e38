"""Depthwise convolutions (one input channel per output channel, or the transposed
reverse) against eager PyTorch and a float64 reference on the CPU (Triton's
interpreter): the direct kernel of the forward and input gradient (NCHW and
channels-last, padded planes or bounds checks, unrolled rows, kept plans), and the
depthwise weight gradient's kernels (direct, per-plane, tap rows, tensor cores), their
tiles, splits and 64-bit offsets. The other convolution paths: ``test_conv.py``."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from kernel_checks import assert_matches, launch_grids  # noqa: E402
from kernel_checks import seeded_randn as _r  # noqa: E402

from opbench.kernels._lib import (  # noqa: E402
    conv,
    conv_backward,
    conv_depthwise,
    conv_depthwise_cl_rows,
    conv_depthwise_rows,
    conv_depthwise_wgrad,
    conv_depthwise_wgrad_cl_walk,
    conv_depthwise_wgrad_dot,
    conv_depthwise_wgrad_rows,
)
from opbench.kernels._lib.launch import cdiv  # noqa: E402

aten = torch.ops.aten


@pytest.fixture(autouse=True)
def _without_channels_last_walks(monkeypatch) -> None:
    """This file counts the launches of the gather, tap-row, plane and tensor-core
    kernels, which channels-last inputs of up to 7x7 reach only with the channels-last
    walks off (``DW_CL_ROWS``, ``DWG_CL_WALK``: on by default, they take those calls
    first). The walks, and what they leave to these kernels, are tested in
    ``test_conv_depthwise_cl_rows.py`` and ``test_conv_depthwise_wgrad_cl_walk.py``."""
    monkeypatch.setattr(conv_depthwise_cl_rows, "DW_CL_ROWS", False)
    monkeypatch.setattr(conv_depthwise_wgrad_cl_walk, "DWG_CL_WALK", False)


# name: (input shape, weight shape, stride, padding, dilation, transposed, output_padding,
# groups): the direct kernel's cases (one input channel per output channel, or the
# transposed reverse); 20 and 12 channels so small tiles split the channels unevenly
DW_CASES = {
    "1d": ((2, 6, 13), (6, 1, 5), [1], [2], [1], False, [0], 6),
    "1d_strided_dilated_mult2": ((2, 4, 20), (8, 1, 3), [2], [2], [3], False, [0], 4),
    "2d": ((2, 20, 9, 8), (20, 1, 3, 3), [1, 1], [1, 1], [1, 1], False, [0, 0], 20),
    "2d_stride2_dilated": ((2, 12, 11, 10), (12, 1, 5, 3), [2, 2], [2, 1], [1, 2], False,
                           [0, 0], 12),
    "2d_mult3": ((2, 5, 8, 7), (15, 1, 3, 3), [2, 1], [1, 0], [2, 1], False, [0, 0], 5),
    "2d_1x1": ((2, 8, 5, 5), (8, 1, 1, 1), [1, 1], [0, 0], [1, 1], False, [0, 0], 8),
    "2d_transposed_mult2": ((2, 6, 5, 4), (6, 2, 3, 3), [2, 2], [1, 1], [1, 1], True, [1, 0],
                            6),
    "2d_transposed": ((2, 6, 5, 4), (6, 1, 3, 3), [2, 2], [1, 1], [1, 1], True, [1, 0], 6),
    "3d": ((1, 6, 5, 6, 7), (12, 1, 3, 2, 3), [1, 2, 1], [1, 0, 1], [1, 1, 2], False,
           [0, 0, 0], 6),
}  # fmt: skip


def _dw_args(case: str, dtype: torch.dtype, layout: str) -> list:
    shape, wshape, stride, padding, dilation, transposed, out_pad, groups = DW_CASES[case]
    x, w = _r(shape, dtype, 11), _r(wshape, dtype, 12)
    c_out = wshape[1] * groups if transposed else wshape[0]
    b = _r((c_out,), dtype, 13)
    if layout == "channels_last":  # 1-D: channels innermost by a permutation (as traced)
        if x.dim() == 3:
            x = x.transpose(1, 2).contiguous().transpose(1, 2)
        else:
            fmt = torch.channels_last if x.dim() == 4 else torch.channels_last_3d
            x = x.to(memory_format=fmt)
    return [x, w, b, stride, padding, dilation, transposed, out_pad, groups]


def _count_direct(monkeypatch) -> list[tuple[int, ...]]:
    """The launches of the direct depthwise kernel (forward and input gradient), with the
    NCHW 3x3 row walk off, so the gather kernel serves every case here (the walk's own
    tests: ``test_conv_depthwise_rows.py``)."""
    monkeypatch.setattr(conv_depthwise_rows, "DW_ROWS", False)
    return launch_grids(monkeypatch, conv, "_depthwise")


def _dw_tiles(monkeypatch, tiles: str) -> None:
    """``gpu``: the GPU's tile choice under the interpreter shrunk so every case runs
    several position and channel tiles (4 channels: 20 and 12 split unevenly; channels
    last included); ``int64``: that and 64-bit offsets forced; ``unrolled``: that with
    the loop over kernel rows unrolled for every kernel size, both layouts."""
    if tiles == "interpreter":
        return
    if tiles == "unrolled":
        monkeypatch.setattr(conv, "DW_UNROLL_MAX_KH", 99)
        monkeypatch.setattr(conv, "DW_UNROLL_MAX_KH_CL", 99)
    monkeypatch.setattr(conv, "_INTERPRETING", False)
    for name, v in (("DW_BLOCK_P", 16), ("DW_BLOCK_C", 4), ("DW_BLOCK_P_CL", 16),
                    ("DW_BLOCK_C_CL", 4)):  # fmt: skip
        monkeypatch.setattr(conv, name, v)
    if tiles == "int64":
        monkeypatch.setattr(conv, "_I32_LIMIT", 0)


@pytest.mark.parametrize("padded", [True, False], ids=["padded", "bounded"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
@pytest.mark.parametrize("case", list(DW_CASES))
def test_depthwise_direct(case: str, layout: str, dtype: torch.dtype, padded: bool,
                          monkeypatch) -> None:  # fmt: skip
    """Forward and input gradient through the direct kernel (counted: both launch it),
    against eager and float64, with eager's output strides; with ``DW_PADDED`` the NCHW
    2-D and 1-D cases of uniform taps go through zero-padded planes (counted too)."""
    monkeypatch.setattr(conv_depthwise, "DW_PADDED", padded)
    monkeypatch.setattr(
        conv_depthwise, "DW_PAD_MIN_TAPS", 1
    )  # every case's kernel, whatever its size
    monkeypatch.setattr(conv_depthwise, "DW_PAD_MAX_GROWTH", 100)
    pads = launch_grids(monkeypatch, conv_depthwise, "_pad")
    calls = _count_direct(monkeypatch)
    args = _dw_args(case, dtype, layout)
    got = conv.convolution(*args)
    assert len(calls) == 1
    eager = aten.convolution(*args)
    if args[0].dim() == 4:
        assert got.stride() == eager.stride()
    assert_matches(got, aten.convolution, *args)
    x, w, b, *rest = args
    gy = _r(tuple(eager.shape), dtype, 14)
    bargs = [gy, x, w, [b.numel()], *rest, [True, False, False]]
    gi = conv_backward.convolution_backward(*bargs)
    assert len(calls) == 2
    assert_matches(gi, aten.convolution_backward, *bargs)
    # NCHW planes of 1-D and 2-D, uniform taps: the forward's input, and the input
    # gradient's (gy, made contiguous here whatever the layout)
    unit, planes = list(args[3]) == [1] * len(args[3]), padded and x.dim() < 5
    forward = planes and layout == "contiguous" and (not args[6] or unit)
    assert len(pads) == forward + (planes and (args[6] or unit)), pads


@pytest.mark.slow
@pytest.mark.parametrize("tiles", ["gpu", "int64", "unrolled"])
@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
@pytest.mark.parametrize("case", list(DW_CASES))
def test_depthwise_direct_gpu_tiles(case: str, layout: str, tiles: str, monkeypatch) -> None:
    """The same under small GPU tiles (masked channel and position edges) and with 64-bit
    offsets (the input gradient: the weight gradient stays on the implicit GEMM)."""
    _dw_tiles(monkeypatch, tiles)
    calls = _count_direct(monkeypatch)
    args = _dw_args(case, torch.float32, layout)
    assert_matches(conv.convolution(*args), aten.convolution, *args)
    x, w, b, *rest = args
    gy = _r(tuple(aten.convolution(*args).shape), torch.float32, 14)
    bargs = [gy, x, w, [b.numel()], *rest, [True, False, False]]
    assert_matches(conv_backward.convolution_backward(*bargs), aten.convolution_backward, *bargs)
    assert len(calls) == 2


def _tap_reads(transposed: bool, o: int, k: int, s: int, p: int, d: int) -> list[int]:
    """The input positions the direct kernel reads along one axis: ``o * s - p + k * d``
    forward, ``o + p - k * d`` transposed (unit stride), every output and tap."""
    if transposed:
        return [oo + p - kk * d for oo in range(o) for kk in range(k)]
    return [oo * s - p + kk * d for oo in range(o) for kk in range(k)]


@pytest.mark.parametrize("weight_tile", [True, False], ids=["weight-tile", "weight-vector"])
@pytest.mark.parametrize("case", ["2d_mult3", "2d_transposed_mult2", "2d_stride2_dilated"])
def test_channels_last_weight_reads(case: str, weight_tile: bool, monkeypatch) -> None:
    """Channels-last, the direct kernel reads a tap's weights (a tap-major copy) either as
    a whole tile or as a vector (``DW_WEIGHT_TILE_CL``): both against eager and float64,
    channel multipliers and a transposed convolution included."""
    monkeypatch.setattr(conv, "DW_WEIGHT_TILE_CL", weight_tile)
    args = _dw_args(case, torch.float32, "channels_last")
    assert_matches(conv.convolution(*args), aten.convolution, *args)


@pytest.mark.parametrize("transposed", [False, True], ids=["forward", "transposed"])
def test_depthwise_pads_hold_every_tap(transposed: bool, monkeypatch) -> None:
    """``no_bounds_pads``: over many geometries, every tap of every output position, moved by
    the padding it returns, reads inside the padded plane, and the padding is the least
    that does (its first and last rows and columns are read)."""
    import itertools

    monkeypatch.setattr(conv_depthwise, "DW_PAD_MIN_TAPS", 1)

    for n, k, s, p, d in itertools.product([1, 4, 7], [1, 2, 3, 5], [1, 2], [0, 1, 3],
                                           [1, 2]):  # fmt: skip
        if transposed and s != 1:
            continue
        if transposed:
            o = n - 1 - 2 * p + d * (k - 1) + 1
        else:
            o = (n + 2 * p - d * (k - 1) - 1) // s + 1
        if o <= 0:
            continue
        read = _tap_reads(transposed, o, k, s, p, d)
        before, after = max(0, -min(read)), max(0, max(read) - (n - 1))  # the least padding
        got = conv_depthwise.no_bounds_pads(
            transposed, [n, 1], [o, 1], [k, 1], [s, 1], [p, 0], [d, 1]
        )
        if got is None:  # grown past the limit: the bounded kernel serves it
            assert n + before + after > conv_depthwise.DW_PAD_MAX_GROWTH * n
            continue
        assert got[0] == (before, after, 0, 0)
        # the kernel's padding over the padded plane moves every read by ``before``
        assert _tap_reads(transposed, o, k, s, got[1][0], d) == [r + before for r in read]


def test_depthwise_padding_only_where_it_paid() -> None:
    """The rule read from the H200's tuning rows: 5x5 kernels and up, planes grown at most
    ``DW_PAD_MAX_GROWTH`` times; 3x3 kernels and a 7 x 7 plane padded to 11 x 11 stay
    bounded."""
    pads = conv_depthwise.no_bounds_pads
    assert pads(False, [21, 21], [21, 21], [5, 5], [1, 1], [2, 2], [1, 1]) is not None
    assert pads(False, [32, 32], [32, 32], [7, 7], [1, 1], [3, 3], [1, 1]) is not None
    assert pads(False, [42, 42], [42, 42], [3, 3], [1, 1], [1, 1], [1, 1]) is None
    assert pads(False, [7, 7], [7, 7], [5, 5], [1, 1], [2, 2], [1, 1]) is None  # 2.5x area


def test_depthwise_plans_are_kept_per_call_and_settings(monkeypatch) -> None:
    """A depthwise convolution's launch plan is kept per distinct call, and a setting that
    changes (the padding rule here, a tile there) gives a new plan, not the kept one:
    the second call returns the same plan object; with ``DW_PADDED`` off the 5x5 planes
    are no longer padded; the grid follows ``BLOCK_P``."""
    x = _r((2, 6, 21, 21), torch.float32, 41)
    x5, w5 = x.unsqueeze(2), _r((6, 1, 1, 5, 5), torch.float32, 42)
    y5 = torch.empty((2, 6, 1, 21, 21))

    def plan(tiles=(64, 4, 4, 3, False, 0)):
        return conv_depthwise.depthwise_plan(
            tuple(x5.shape), x5.stride(), tuple(w5.shape), w5.stride(), tuple(y5.shape),
            y5.stride(), 1, 1, (1, 1, 1), (0, 2, 2), (1, 1, 1), False, 2, False, 2**31, tiles)  # fmt: skip

    first = plan()
    assert plan() is first and first.pads is not None and first.weight == "as_is"
    assert first.consts["NO_BOUNDS"] and first.ints[3:5] == (25, 25)  # the padded plane
    monkeypatch.setattr(conv_depthwise, "DW_PADDED", False)
    bounded = plan()
    assert bounded.pads is None and not bounded.consts["NO_BOUNDS"]
    assert bounded.ints[3:5] == (21, 21) and bounded.ints[9:11] == (2, 2)
    assert plan((32, 4, 4, 3, False, 0)).grid == (cdiv(2 * 21 * 21, 32), 2)
    cl = x5.permute(0, 2, 3, 4, 1).contiguous().permute(0, 4, 1, 2, 3)  # channels-last
    taps = conv_depthwise.depthwise_plan(
        tuple(cl.shape), cl.stride(), tuple(w5.shape), w5.stride(), tuple(y5.shape),
        y5.stride(), 1, 1, (1, 1, 1), (0, 2, 2), (1, 1, 1), False, 2, False, 2**31,
        (4, 64, 2, 3, False, 0))  # fmt: skip
    assert taps.weight == "taps_major" and taps.pads is None and taps.consts["CHANNELS_INNER"]
    assert taps.ints[16:19] == (1, 1, 6)  # a tap's channels contiguous, taps 6 apart
    # the 5x5 kernel's rows unrolled from a limit of 5 rows on, not below
    assert first.consts["KH_UNROLL"] == 1 and plan((64, 4, 4, 3, False, 4)).consts["KH_UNROLL"] == 1
    assert plan((64, 4, 4, 3, False, 5)).consts["KH_UNROLL"] == 5


def test_padded_planes_match_torch_pad(monkeypatch) -> None:
    """The padding kernel against ``torch.nn.functional.pad`` over a strided input (a
    channel slice of a channels-last tensor), a padded plane of three position blocks
    and 8 planes in runs of 3 (the last one short)."""
    monkeypatch.setattr(conv_depthwise, "PAD_PLANES_PER_PROGRAM", 3)
    grids = launch_grids(monkeypatch, conv_depthwise, "_pad")
    x = _r((2, 6, 5, 300), torch.float32, 41).to(memory_format=torch.channels_last)[:, 1:5]
    x5 = x.unsqueeze(2)
    got = conv_depthwise.padded_planes(x5, 2, 1, 3, 0, big=False)
    want = torch.nn.functional.pad(x, (3, 0, 2, 1)).unsqueeze(2)
    assert got.is_contiguous() and torch.equal(got, want)
    assert grids == [(3, 3)], grids  # 8 x 303 positions: 3 blocks of 1024; 8 planes by 3


def _count_dwg(monkeypatch) -> list[tuple[int, ...]]:
    """The launches of the flattened-position depthwise weight-gradient kernel."""
    return launch_grids(monkeypatch, conv_depthwise_wgrad, "_dwg")


def _count_dwg_plane(monkeypatch) -> list[tuple[int, ...]]:
    """The launches of the plane depthwise weight-gradient kernel (NCHW-like inputs)."""
    return launch_grids(monkeypatch, conv_depthwise_wgrad, "_dwg_plane")


def _dw_weight_grad_args(case: str, dtype: torch.dtype, layout: str) -> list:
    """convolution_backward's arguments for the weight and bias gradients of a
    ``DW_CASES`` case, ``grad_output`` in the layout eager's forward gives it."""
    x, w, b, *rest = _dw_args(case, dtype, layout)
    y = aten.convolution(x, w, b, *rest)
    gy = torch.empty_like(y).copy_(_r(tuple(y.shape), dtype, 14))
    return [gy, x, w, [b.numel()], *rest, [False, True, True]]


def _weight_grad_twice(x: torch.Tensor, w: torch.Tensor, rest: list, seed: int) -> None:
    """The weight gradient of ``x`` and ``w`` (``rest``: the convolution's arguments after
    the bias) under a drawn grad_output in the output's layout: against eager and float64,
    and a second call gives the same bits (split partials summed in a fixed order)."""
    y = aten.convolution(x, w, None, *rest)
    gy = torch.empty_like(y).copy_(_r(tuple(y.shape), x.dtype, seed))
    args = [gy, x, w, None, *rest, [False, True, False]]
    got = conv_backward.convolution_backward(*args)
    assert_matches(got, aten.convolution_backward, *args)
    assert torch.equal(got[1], conv_backward.convolution_backward(*args)[1])


def _count_dwg_dot(monkeypatch) -> list[tuple[int, ...]]:
    """The launches of the tensor-core depthwise weight-gradient kernel."""
    return launch_grids(monkeypatch, conv_depthwise_wgrad_dot, "_dwg_dot")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize(
    "layout,dot,plane,tap_rows",
    # channels-last inputs take the tap-row kernel (2-D) or the flattened one whatever
    # DWG_DOT and DWG_PLANE say
    [("contiguous", True, True, True), ("contiguous", False, True, True),
     ("contiguous", False, False, True), ("channels_last", True, True, True),
     ("channels_last", True, True, False)],
    ids=["contiguous-dot", "contiguous-plane", "contiguous-flat", "channels_last-rows",
         "channels_last-flat"],
)  # fmt: skip
@pytest.mark.parametrize("case", list(DW_CASES))
def test_depthwise_weight_gradient(case: str, layout: str, dot: bool, plane: bool,
                                   tap_rows: bool, dtype: torch.dtype, monkeypatch) -> None:  # fmt: skip
    """The weight gradient of a depthwise convolution (one gathered channel a weight
    row) goes through a direct kernel. Where the summed tensor's positions are
    contiguous: the tensor-core kernel for 16-bit 1-D and 2-D ones (``DWG_DOT`` on), else
    the plane kernel (``DWG_PLANE`` on); where its channels are, the tap-row kernel (2-D,
    ``DWG_ROWS`` on); else the flattened-position one. A transposed one whose rows read
    several channels stays on the implicit GEMM. Against eager and float64."""
    monkeypatch.setattr(conv_depthwise_wgrad_dot, "DWG_DOT", dot)
    monkeypatch.setattr(conv_depthwise_wgrad_dot, "DWG_DOT_MIN_STEPS", 0)  # tiny cases too
    monkeypatch.setattr(conv_depthwise_wgrad, "DWG_PLANE", plane)
    monkeypatch.setattr(conv_depthwise_wgrad_rows, "DWG_ROWS", tap_rows)
    flat, planes = _count_dwg(monkeypatch), _count_dwg_plane(monkeypatch)
    dots = _count_dwg_dot(monkeypatch)
    rows = launch_grids(monkeypatch, conv_depthwise_wgrad_rows, "_dwg_rows")
    args = _dw_weight_grad_args(case, dtype, layout)
    got = conv_backward.convolution_backward(*args)
    direct = 0 if args[2].shape[1] > 1 else 1
    a = args[0]
    pos_inner = a.stride(-1) == 1 and a.stride(1) != 1
    tensor_cores = dot and dtype != torch.float32 and a.dim() < 5
    assert len(dots) == (direct if pos_inner and tensor_cores else 0), dots
    assert len(planes) == (direct if plane and pos_inner and not dots else 0)
    channels_inner = a.stride(1) == 1 and a.shape[1] > 1 and a.dim() < 5
    assert len(rows) == (direct if tap_rows and channels_inner and not planes else 0), rows
    assert len(flat) == direct - len(planes) - len(rows) - len(dots)
    assert_matches(got, aten.convolution_backward, *args)


@pytest.mark.slow
@pytest.mark.parametrize("big", [False, True], ids=["int32", "int64"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_depthwise_weight_gradient_dot_blocks_and_splits(dtype: torch.dtype, big: bool,
                                                         monkeypatch) -> None:  # fmt: skip
    """The tensor-core kernel over several column blocks of a plane (16 output columns a
    block: a 40-column plane is 3, the last one short) and several splits of the images
    (7 in 3: 3, 3 and 1), strided, dilated and with a channel multiplier: every partial in
    its own workspace row, summed in a fixed order (two calls give the same bits), against
    eager and float64; then with 64-bit offsets forced."""
    if big:
        monkeypatch.setattr(conv, "_I32_LIMIT", 0)
    monkeypatch.setattr(conv_depthwise_wgrad_dot, "DWG_DOT_MAX_Q", 16)
    monkeypatch.setattr(conv_depthwise_wgrad_dot, "DWG_DOT_ROWS", 16)
    monkeypatch.setattr(conv_depthwise_wgrad_dot, "DWG_DOT_MIN_STEPS", 0)
    monkeypatch.setattr(conv_depthwise_wgrad, "dwg_plane_splits", lambda p, n, sms: 3)
    grids = _count_dwg_dot(monkeypatch)
    x, w = _r((7, 3, 6, 40), dtype, 41), _r((6, 1, 3, 3), dtype, 42)
    _weight_grad_twice(x, w, [[1, 1], [2, 1], [2, 1], False, [0, 0], 3], 43)
    assert grids[0] == (6, 3 * 3, 3), grids  # weight rows, kernel rows x column blocks, splits


@pytest.mark.parametrize("images", [2, 16])
def test_depthwise_weight_gradient_dot_needs_rows(images: int, monkeypatch) -> None:
    """The tensor-core kernel takes a weight gradient only where each program sums at
    least ``DWG_DOT_MIN_STEPS`` steps of rows (its end extracts the taps from a whole
    product); fewer go to the plane kernel. 2 images of 9 rows: 18 < 4 x 16 rows; 16
    images: 144 (one split: the CPU counts one multiprocessor)."""
    monkeypatch.setattr(conv_depthwise_wgrad, "sm_count", lambda device: 1)
    dots, planes = _count_dwg_dot(monkeypatch), _count_dwg_plane(monkeypatch)
    x, w = _r((images, 4, 9, 8), torch.float16, 61), _r((4, 1, 3, 3), torch.float16, 62)
    rest = [[1, 1], [1, 1], [1, 1], False, [0, 0], 4]
    gy = _r(tuple(aten.convolution(x, w, None, *rest).shape), torch.float16, 63)
    args = [gy, x, w, None, *rest, [False, True, False]]
    assert_matches(conv_backward.convolution_backward(*args), aten.convolution_backward, *args)
    assert (len(dots), len(planes)) == ((0, 1) if images == 2 else (1, 0)), (dots, planes)


def test_depthwise_weight_gradient_dot_blocks() -> None:
    """The tensor-core kernel's column blocks: the plane's width rounded up to a power of
    two (16 to ``DWG_DOT_MAX_Q``), and the input columns its taps reach; a product wider
    than ``DWG_DOT_MAX_I`` goes to the plane kernel."""
    blocks = conv_depthwise_wgrad_dot.dot_blocks
    assert blocks(19, 3, 1, 1) == (32, 64)  # 31 + 2 + 1 = 34 columns
    assert blocks(7, 3, 1, 1) == (16, 32) and blocks(14, 1, 1, 1) == (16, 16)
    assert blocks(112, 3, 2, 1) == (32, 128)  # 31 * 2 + 2 + 1 = 65 columns
    assert conv_depthwise_wgrad_dot.DWG_DOT_MAX_I < blocks(64, 5, 8, 2)[1]  # 257 columns


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_depthwise_weight_gradient_tap_rows_split(dtype: torch.dtype, monkeypatch) -> None:
    """The tap-row kernel over several channel tiles (masked edge), padded taps of a row
    and several splits of the positions, strided and dilated: against eager, and two
    calls give the same bits (the partials are summed in a fixed order)."""
    monkeypatch.setattr(conv_depthwise_wgrad_rows, "DWG_ROWS_BLOCK_C", 8)
    monkeypatch.setattr(conv_depthwise_wgrad_rows, "DWG_ROWS_TILE", 128)
    monkeypatch.setattr(conv_depthwise_wgrad_rows, "rows_splits", lambda tiles, iters, sms: 3)
    grids = launch_grids(monkeypatch, conv_depthwise_wgrad_rows, "_dwg_rows")
    x = _r((3, 12, 9, 8), dtype, 31).to(memory_format=torch.channels_last)
    w = _r((12, 1, 3, 5), dtype, 32)
    _weight_grad_twice(x, w, [[2, 1], [1, 2], [1, 1], False, [0, 0], 12], 33)
    assert grids and grids[0] == (3, 2, 3), grids  # kernel rows, channel tiles, splits


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
def test_depthwise_weight_gradient_split(layout: str, dtype: torch.dtype, monkeypatch) -> None:
    """Many positions over few channels: the positions are split over programs (small
    tiles make several splits and channel tiles, with masked edges) and the partials
    summed in a fixed order: two calls give the same bits."""
    monkeypatch.setattr(conv_depthwise_wgrad_dot, "DWG_DOT", False)
    monkeypatch.setattr(conv_depthwise_wgrad, "DWG_PLANE", False)
    monkeypatch.setattr(conv_depthwise_wgrad_rows, "DWG_ROWS", False)
    monkeypatch.setattr(conv_depthwise_wgrad, "DWG_TILE", 64)
    monkeypatch.setattr(conv_depthwise_wgrad, "dwg_splits", lambda tiles, iters, sms: 3)
    grids = _count_dwg(monkeypatch)
    x, w = _r((2, 5, 9, 7), dtype, 21), _r((5, 1, 3, 3), dtype, 22)
    if layout == "channels_last":
        x = x.to(memory_format=torch.channels_last)
    _weight_grad_twice(x, w, [[1, 1], [1, 1], [1, 1], False, [0, 0], 5], 23)
    assert grids and grids[0][1] == 3, grids  # split over positions
    assert grids[0][0] > 1 or layout == "channels_last", grids  # channel tiles (NCHW)


@pytest.mark.slow  # 4.9-7.7 s a case on 2 cores (2026-11-28, --durations)
@pytest.mark.parametrize("images", [1, 2])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_depthwise_weight_gradient_plane_split(dtype: torch.dtype, images: int,
                                               monkeypatch) -> None:  # fmt: skip
    """The plane kernel over several blocks of a plane and several splits of the images
    (a small tile: 4 blocks of 16 positions of a 9 x 7 plane, 3 splits of 7 images): every
    partial lands in its own workspace row, summed in a fixed order (two calls give the
    same bits), against eager and float64; a plane of one block, 5 images in splits of
    2, 2 and 1; one image a step and two (the second masked off past a split's end)."""
    monkeypatch.setattr(conv_depthwise_wgrad_dot, "DWG_DOT", False)  # f16 on the plane kernel
    monkeypatch.setattr(conv_depthwise_wgrad, "DWG_PLANE_TILE", 256)
    monkeypatch.setattr(conv_depthwise_wgrad, "DWG_PLANE_IMAGES", images)
    monkeypatch.setattr(conv_depthwise_wgrad, "dwg_plane_splits", lambda p, n, sms: 3)
    grids = _count_dwg_plane(monkeypatch)
    for shape in [(7, 5, 9, 7), (5, 5, 3, 2)]:
        x, w = _r(shape, dtype, 31), _r((5, 1, 3, 3), dtype, 32)
        _weight_grad_twice(x, w, [[1, 1], [1, 1], [1, 1], False, [0, 0], 5], 33)
    # 256 / 16 taps = 16 positions a block: 63 positions are 4 blocks; 7 images in 3 splits
    assert grids == [(5, 4, 3)] * 2 + [(5, 1, 3)] * 2, grids


def test_depthwise_weight_gradient_plane_splits_fill_the_gpu() -> None:
    """The plane kernel splits the images only where the weight rows and plane blocks
    leave the GPU short of ``DWG_PROGRAMS_PER_SM`` programs a multiprocessor, and keeps at
    least 4 images a split."""
    splits = conv_depthwise_wgrad.dwg_plane_splits
    per_sm = conv_depthwise_wgrad.DWG_PROGRAMS_PER_SM
    assert splits(728, 32, 132) == 1  # [32, 728, 19, 19]: 728 programs already
    assert 72 * splits(72, 128, 132) >= per_sm * 132  # few rows, many images
    assert splits(4, 12, 132) == 3 and splits(1, 10**6, 132) == 256
    blocks = conv_depthwise_wgrad.dwg_plane_blocks
    assert blocks(9, 361, 4096) == (16, 256) and blocks(49, 196, 4096) == (64, 64)
    assert blocks(9, 1) == (16, 16)  # at least a warp's half-row


def test_depthwise_weight_gradient_splits_fill_the_gpu() -> None:
    """Few channels over many positions are split until the GPU holds about
    ``DWG_PROGRAMS_PER_SM`` programs a multiprocessor (each at least 8 position blocks);
    channels enough to fill it alone are not split."""
    splits = conv_depthwise_wgrad.dwg_splits
    per_sm = conv_depthwise_wgrad.DWG_PROGRAMS_PER_SM
    assert 72 * splits(72, 3136, 132) >= per_sm * 132  # [128, 72, 56, 56]: was 1 split
    assert splits(728, 91, 132) == 1  # [32, 728, 19, 19]: 728 programs already
    assert splits(4, 20, 132) == 2  # at least 8 blocks a program
    assert splits(1, 10**6, 132) == 256 and splits(8, 10, 132) == 1


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
@pytest.mark.parametrize("case", list(DW_CASES))
def test_depthwise_weight_gradient_int64(case: str, layout: str, monkeypatch) -> None:
    """The direct weight-gradient kernel with 64-bit offsets forced."""
    monkeypatch.setattr(conv, "_I32_LIMIT", 0)
    args = _dw_weight_grad_args(case, torch.float32, layout)
    assert_matches(conv_backward.convolution_backward(*args), aten.convolution_backward, *args)


def test_depthwise_routing() -> None:
    """Only one-channel-per-group cases go direct; a channel multiplier past
    ``DW_MAX_MULT`` and grouped convolutions stay on the implicit GEMM."""
    assert conv._is_depthwise(1, 1) and conv._is_depthwise(1, 3) and conv._is_depthwise(2, 1)
    assert not conv._is_depthwise(2, 3)  # 2d_groups
    assert not conv._is_depthwise(1, conv.DW_MAX_MULT + 1)


@pytest.mark.parametrize("layout", ["nchw", "channels_last"])
@pytest.mark.parametrize("k", [3, 5])
def test_depthwise_repeat_calls_run_from_their_plan(layout: str, k: int, monkeypatch) -> None:
    """A depthwise forward's repeat call with the same signature runs from its kept run
    (``conv._DepthwiseRun``: views of the new operands, the padded planes of a 5x5 rebuilt
    per call): new values, then an input one image into a larger buffer (another storage
    offset), match eager; a setting changed since (the weight tile) makes a new run, whose
    result matches too."""
    conv._FORWARD_PLANS.clear()
    fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
    rest = ([1, 1], [k // 2, k // 2], [1, 1], False, [0, 0], 8)
    runs = []
    for seed in range(3):
        x = _r((2, 8, 9, 7), torch.float32, seed).contiguous(memory_format=fmt)
        if seed == 2:
            x = torch.cat([torch.zeros_like(x[:1]), x]).contiguous(memory_format=fmt)[1:]
            monkeypatch.setattr(conv, "DW_WEIGHT_TILE_CL", not conv.DW_WEIGHT_TILE_CL)
        w, b = _r((8, 1, k, k), torch.float32, seed + 3), _r((8,), torch.float32, seed + 6)
        assert_matches(conv.convolution(x, w, b, *rest), aten.convolution, x, w, b, *rest)
        runs.append(next(iter(conv._FORWARD_PLANS.values())))
    assert isinstance(runs[0], conv._DepthwiseRun) and runs[1] is runs[0]
    assert runs[2] is not runs[0] and runs[2].settings != runs[0].settings
