"""Pointwise (1x1) convolutions on the matmul kernel, against eager PyTorch and a float64
reference on CPU (Triton's interpreter): the batch-summing product of the weight gradient
(``matmul_batch_sum_into``, the kernel's ``BATCH_K`` mode) with and without its split into
groups of images, the channels-last path that merges the images into one reduction, the
forward's tile rule, and sizes that are multiples of 4 but not 8 elements (the vector
width the launcher now passes instead of none)."""

from __future__ import annotations

import math

import pytest
import torch

pytest.importorskip("triton")

from kernel_checks import DEVICE, assert_matches  # noqa: E402
from kernel_checks import seeded_randn as _r

from opbench.kernels._lib import (  # noqa: E402
    conv,
    conv_backward,  # noqa: E402
    conv_pointwise,
    matmul,
    matmul_batch_sum,
)
from opbench.kernels._lib.matmul_pointer import ROW, layout_of, pow2_multiple  # noqa: E402

aten = torch.ops.aten
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def _batch_sum(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Eager's ``sum_i a[i] @ b[i]``: one product over the merged reduction (so 16-bit
    operands are rounded once, as the kernel does)."""
    return a.permute(1, 0, 2).reshape(a.shape[1], -1) @ b.reshape(-1, b.shape[2])


def _operand(shape: tuple[int, int, int], layout: str, dtype: torch.dtype, seed: int):
    """A ``[batch, rows, cols]`` operand with its cols contiguous (``row``), its rows
    contiguous (``col``) or neither (``sliced``)."""
    B, R, C = shape
    if layout == "row":
        return _r(shape, dtype, seed)
    if layout == "col":
        return _r((B, C, R), dtype, seed).transpose(1, 2)
    return _r((B, R, 2 * C), dtype, seed)[:, :, ::2]


@pytest.fixture(autouse=True)
def batch_sum_everywhere(monkeypatch) -> None:
    """The batch-summing weight gradient for every NCHW size (these shapes are far under
    ``POINTWISE_PARTIALS_MAX``, which keeps small ones on per-image partials);
    :func:`test_weight_gradient_per_image_partials` sets it back."""
    monkeypatch.setattr(conv_pointwise, "POINTWISE_PARTIALS_MAX", 0)


@pytest.fixture
def one_sm(monkeypatch) -> None:
    """One SM: the output's tiles fill it, so one program walks every image (the
    interpreter's 4 SMs would otherwise split small problems into single-image groups)."""
    for module in (matmul, matmul_batch_sum):
        monkeypatch.setattr(module, "sm_count", lambda device: 1)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("la,lb", [("row", "col"), ("col", "row"), ("row", "row"),
                                   ("sliced", "col")])  # fmt: skip
def test_batch_sum_layouts_and_tails(la: str, lb: str, dtype: torch.dtype, one_sm) -> None:
    """Odd sizes: every tile has masked rows and columns, and each entry's K (37) ends in
    a part block, so the walk from an entry's last block to the next entry's first is
    exercised with masking on both sides of it."""
    B, M, N, K = 3, 19, 45, 37
    a = _operand((B, M, K), la, dtype, 1)
    b = _operand((B, K, N), lb, dtype, 2)
    out = torch.empty((M, N), dtype=dtype, device=DEVICE)
    matmul_batch_sum.matmul_batch_sum_into(out, a, b)
    assert_matches(out, _batch_sum, a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("groups", [1, 2, 4])
def test_batch_sum_groups_named_by_the_config(groups: int, dtype: torch.dtype) -> None:
    """A config's 7th entry names the group count: each group sums its own images into
    an fp32 partial, summed afterwards; every count gives the product. The output is
    written through transposed strides (the kernel's column-major store)."""
    B, M, N, K = 4, 20, 33, 18
    a, b = _operand((B, M, K), "row", dtype, 3), _operand((B, K, N), "col", dtype, 4)
    out = torch.empty((N, M), dtype=dtype, device=DEVICE).t()
    matmul_batch_sum.matmul_batch_sum_into(out, a, b, (16, 16, 16, 4, 4, 1, groups))
    assert_matches(out, _batch_sum, a, b)


def test_batch_sum_group_count_must_divide_the_batch() -> None:
    a, b = _r((3, 4, 5), torch.float32, 1), _r((3, 5, 6), torch.float32, 2)
    with pytest.raises(ValueError):
        matmul_batch_sum.matmul_batch_sum_into(torch.empty(4, 6), a, b, (16, 16, 16, 4, 4, 1, 2))


@pytest.mark.parametrize("shape", [(0, 5, 6, 7), (2, 5, 6, 0)], ids=["no entries", "K=0"])
def test_batch_sum_of_nothing_is_zero(shape: tuple[int, int, int, int]) -> None:
    B, M, N, K = shape
    a, b = _r((B, M, K), torch.float32, 1), _r((B, K, N), torch.float32, 2)
    out = torch.full((M, N), float("nan"), device=DEVICE)
    matmul_batch_sum.matmul_batch_sum_into(out, a, b)
    assert_matches(out, _batch_sum, a, b)


def test_batch_groups_rule() -> None:
    """Split only where the tiles leave SMs idle; among divisors of the batch, the fewest
    waves x images per program, fewest groups on a tie."""
    assert matmul_batch_sum.batch_groups(64, 32, 132) == 2  # 1024 x 1024 outputs, 128x128 tiles
    assert matmul_batch_sum.batch_groups(9, 16, 132) == 8  # 336 x 336
    assert matmul_batch_sum.batch_groups(132, 32, 132) == 1  # the tiles fill the GPU
    assert matmul_batch_sum.batch_groups(500, 32, 132) == 1
    assert matmul_batch_sum.batch_groups(10, 7, 132) == 7  # a prime batch: all or nothing
    assert matmul_batch_sum.batch_groups(10, 1, 132) == 1
    assert matmul_batch_sum.batch_groups(10, 0, 132) == 1


# ----------------------------------------------------------------------------- the convolutions


def _conv_case(shape, c_out, dtype, transposed=False, x_cl=False, gy_cl=False):
    x = _r(shape, dtype, 5)
    wshape = (shape[1], c_out) if transposed else (c_out, shape[1])
    w = _r((*wshape, *([1] * (len(shape) - 2))), dtype, 6)
    nd = len(shape) - 2
    args = [[1] * nd, [0] * nd, [1] * nd, transposed, [0] * nd, 1]
    y = aten.convolution(x, w, None, *args)
    gy = _r(tuple(y.shape), dtype, 7)
    fmt = torch.channels_last if len(shape) == 4 else torch.channels_last_3d
    if x_cl:
        x = x.to(memory_format=fmt)
    if gy_cl:
        gy = gy.to(memory_format=fmt)
    return gy, x, w, args


def _spy(monkeypatch, name: str) -> list:
    """Count calls of conv_pointwise's ``name`` (matmul_into or matmul_batch_sum_into)."""
    calls: list = []
    real = getattr(conv_pointwise, name)
    monkeypatch.setattr(conv_pointwise, name, lambda *a, **k: (calls.append(a), real(*a, **k))[1])
    return calls


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(
    "shape,c_out,transposed",
    [((3, 20, 5, 7), 17, False), ((2, 9, 6, 5), 24, True), ((2, 5, 3, 2, 4), 7, False)],
    ids=["2d", "2d_transposed", "3d"],
)
def test_weight_gradient_nchw_sums_over_the_batch(shape, c_out, transposed, dtype, monkeypatch,
                                                  one_sm) -> None:  # fmt: skip
    """NCHW with several images: the batch-summing mode, not a product per image, one
    program walking every image's positions (35 a 5x7 image: two K blocks of 32)."""
    gy, x, w, args = _conv_case(shape, c_out, dtype, transposed)
    calls = _spy(monkeypatch, "matmul_batch_sum_into")
    mask = [False, True, False]
    got = conv_backward.convolution_backward(gy, x, w, None, *args, mask)
    assert len(calls) == 1
    assert_matches(got, aten.convolution_backward, gy, x, w, None, *args, mask)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_weight_gradient_per_image_partials(dtype: torch.dtype, monkeypatch) -> None:
    """NCHW partials within ``POINTWISE_PARTIALS_MAX``: one product per image into fp32
    partials, summed in a fixed order; the batch-summing mode is not used."""
    monkeypatch.setattr(conv_pointwise, "POINTWISE_PARTIALS_MAX", 64 << 20)
    monkeypatch.setattr(conv_pointwise, "POINTWISE_WGRAD_TRANSPOSE_MIN", None)
    gy, x, w, args = _conv_case((3, 20, 5, 7), 17, dtype)
    summing = _spy(monkeypatch, "matmul_batch_sum_into")
    products = _spy(monkeypatch, "matmul_into")
    mask = [False, True, False]
    got = conv_backward.convolution_backward(gy, x, w, None, *args, mask)
    assert not summing and len(products) == 1 and products[0][0].shape == (3, 17, 20)
    assert_matches(got, aten.convolution_backward, gy, x, w, None, *args, mask)


@pytest.mark.parametrize("wide", [False, True], ids=["bucket", "wide"])
def test_weight_gradient_partials_tile(wide: bool, monkeypatch) -> None:
    """``POINTWISE_WGRAD_WIDE``: the per-image partial products take the forward's tile
    rule (``POINTWISE_CONFIG`` where the bucket's tile is thinner than
    ``POINTWISE_MIN_TILE`` on a product at least twice that on both sides), or the
    matmul bucket's tile when off; the sum is eager's either way. Planned as on the GPU
    with a thin bucket tile, so the wide tile itself runs here."""
    monkeypatch.setattr(conv_pointwise, "POINTWISE_PARTIALS_MAX", 64 << 20)
    monkeypatch.setattr(conv_pointwise, "POINTWISE_WGRAD_WIDE", wide)
    monkeypatch.setattr(conv_pointwise, "POINTWISE_WGRAD_TRANSPOSE_MIN", None)
    # a thin bucket tile, as on the GPU (the interpreter's own is thin too)
    thin = (16, 64, 32, 8, 4, 2)
    monkeypatch.setattr(conv_pointwise, "config_for", lambda *a, **k: thin)
    monkeypatch.setattr(conv_pointwise, "_INTERPRETING", False)
    gy, x, w, args = _conv_case((2, 130, 2, 3), 136, torch.float16)
    configs: list = []
    real = conv_pointwise.matmul_into
    monkeypatch.setattr(conv_pointwise, "matmul_into",
                        lambda *a, **k: (configs.append(k.get("config")), real(*a, **k))[1])  # fmt: skip
    mask = [False, True, False]
    got = conv_backward.convolution_backward(gy, x, w, None, *args, mask)
    assert configs == [conv_pointwise.POINTWISE_CONFIG if wide else None]
    assert_matches(got, aten.convolution_backward, gy, x, w, None, *args, mask)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(3, 20, 5, 7), (2, 12, 4, 4), (2, 6, 3, 5, 3)],
                         ids=["unaligned", "aligned", "3d_unaligned"])  # fmt: skip
@pytest.mark.parametrize("least", [0.0, 0.5, None], ids=["always", "default", "never"])
def test_weight_gradient_transposed_to_channels_last(shape, dtype, least, monkeypatch) -> None:
    """``POINTWISE_WGRAD_TRANSPOSE_MIN``: where an image's positions are not whole 16-byte
    rows (35 and 45 positions; 16 of f16 or f32 are) and the per-image partials would
    take at least that many times the copies' bytes, both NCHW operands are copied
    channels-last and the images merge into one product of ``N x positions``: no
    per-image partials, no batch walk. Aligned rows, a smaller ratio and None keep the
    per-image partials (the batch walk's rows are never copied)."""
    monkeypatch.setattr(conv_pointwise, "POINTWISE_PARTIALS_MAX", 64 << 20)
    monkeypatch.setattr(conv_pointwise, "POINTWISE_WGRAD_TRANSPOSE_MIN", least)
    gy, x, w, args = _conv_case(shape, 17, dtype)
    summing = _spy(monkeypatch, "matmul_batch_sum_into")
    products = _spy(monkeypatch, "matmul_into")
    mask = [False, True, False]
    got = conv_backward.convolution_backward(gy, x, w, None, *args, mask)
    positions = math.prod(shape[2:])
    partials = shape[0] * 17 * shape[1] * 4
    copies = shape[0] * positions * (17 + shape[1]) * gy.element_size()
    if least is not None and positions * gy.element_size() % 16 and partials >= least * copies:
        assert not summing and len(products) == 1
        assert products[0][1].shape == (1, 17, shape[0] * positions)
    else:
        assert len(summing) + len(products) == 1 and all(
            p[0].shape[0] == shape[0] for p in products
        )
    assert_matches(got, aten.convolution_backward, gy, x, w, None, *args, mask)


@pytest.mark.parametrize("which", ["input", "grad_output"])
def test_weight_gradient_copies_skip_strided_positions(which: str, monkeypatch) -> None:
    """An operand whose positions merge but lie two elements apart (every other column
    of a wider tensor) is not copied by the channels-last route, which reads positions
    adjacent: the per-image partials serve it, and the result is eager's."""
    monkeypatch.setattr(conv_pointwise, "POINTWISE_PARTIALS_MAX", 64 << 20)
    monkeypatch.setattr(conv_pointwise, "POINTWISE_WGRAD_TRANSPOSE_MIN", 0.0)
    gy, x, w, args = _conv_case((3, 20, 5, 7), 17, torch.float16)
    if which == "input":
        x = _r((3, 20, 5, 14), torch.float16, 9)[..., ::2]
    else:
        gy = _r((3, 17, 5, 14), torch.float16, 9)[..., ::2]
    assert conv_pointwise.merges(x.shape[2:], x.stride()[2:]) and gy.stride(-1) * x.stride(-1) == 2
    products = _spy(monkeypatch, "matmul_into")
    mask = [False, True, False]
    got = conv_backward.convolution_backward(gy, x, w, None, *args, mask)
    assert len(products) == 1 and products[0][0].shape == (3, 17, 20)
    assert_matches(got, aten.convolution_backward, gy, x, w, None, *args, mask)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("merged", [True, False], ids=["merged", "per_image"])
@pytest.mark.parametrize("transposed", [False, True], ids=["conv", "conv_transposed"])
def test_single_position_is_one_product(merged: bool, transposed: bool, dtype, monkeypatch) -> None:
    """``POINTWISE_MERGE_SINGLE_POSITION``: one position an image (``[N, C, 1, 1]``) is
    one product over the images (batch 1, ``N`` columns) in the forward and the input
    gradient, not ``N`` products one column wide; with a bias, and the whole backward,
    against eager."""
    monkeypatch.setattr(conv_pointwise, "POINTWISE_MERGE_SINGLE_POSITION", merged)
    conv._FORWARD_PLANS.clear()
    gy, x, w, args = _conv_case((6, 20, 1, 1), 24, dtype, transposed)
    bias = _r((24,), dtype, 8)
    products = _spy(monkeypatch, "matmul_into")
    assert_matches(conv.convolution(x, w, bias, *args), aten.convolution, x, w, bias, *args)
    assert [p[1].shape[0] for p in products] == [1 if merged else 6]
    mask = [True, True, True]
    got = conv_backward.convolution_backward(gy, x, w, [24], *args, mask)
    assert_matches(got, aten.convolution_backward, gy, x, w, [24], *args, mask)
    conv._FORWARD_PLANS.clear()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layouts", ["both", "batch_one"])
def test_weight_gradient_merged_images(layouts: str, dtype: torch.dtype, monkeypatch) -> None:
    """Channels-last operands (and one NCHW image) merge the images into one reduction of
    ``N x positions``: a single product, no batch walk."""
    shape = (1, 20, 5, 7) if layouts == "batch_one" else (3, 20, 5, 7)
    cl = layouts == "both"
    gy, x, w, args = _conv_case(shape, 17, dtype, x_cl=cl, gy_cl=cl)
    summing = _spy(monkeypatch, "matmul_batch_sum_into")
    mask = [False, True, False]
    got = conv_backward.convolution_backward(gy, x, w, None, *args, mask)
    assert not summing
    assert_matches(got, aten.convolution_backward, gy, x, w, None, *args, mask)


@pytest.mark.parametrize("which", ["input", "grad_output"])
def test_weight_gradient_mixed_layouts(which: str, monkeypatch, one_sm) -> None:
    """One operand channels-last, the other not: no merged view of both, so the batch
    walk reads one operand rows-contiguous and the other columns-contiguous."""
    gy, x, w, args = _conv_case((3, 20, 5, 7), 17, torch.float16, x_cl=which == "input",
                                gy_cl=which == "grad_output")  # fmt: skip
    summing = _spy(monkeypatch, "matmul_batch_sum_into")
    mask = [True, True, True]
    got = conv_backward.convolution_backward(gy, x, w, [17], *args, mask)
    assert len(summing) == 1
    assert_matches(got, aten.convolution_backward, gy, x, w, [17], *args, mask)


@pytest.mark.parametrize("sms,split", [(1, False), (64, True)])
def test_weight_gradient_image_groups(sms: int, split: bool, monkeypatch) -> None:
    """The images are split into groups only where the output's tiles leave SMs idle
    (here: the SM count patched; the interpreter's 32x32 tiles make 2 of a 40x20 weight
    gradient), each group an fp32 partial summed in a fixed order."""
    for module in (matmul, matmul_batch_sum):
        monkeypatch.setattr(module, "sm_count", lambda device: sms)
    partials = []
    real = matmul_batch_sum.sum_split_partials
    monkeypatch.setattr(matmul_batch_sum, "sum_split_partials",
                        lambda p, *a, **k: (partials.append(p.shape[0]), real(p, *a, **k))[1])  # fmt: skip
    gy, x, w, args = _conv_case((8, 20, 7, 5), 40, torch.float32)  # 35 positions: 2 blocks
    mask = [False, True, False]
    got = conv_backward.convolution_backward(gy, x, w, None, *args, mask)
    want_groups = matmul_batch_sum.batch_groups(2, 8, sms)
    assert (want_groups > 1) == split
    assert partials == ([want_groups] if split else [])
    assert_matches(got, aten.convolution_backward, gy, x, w, None, *args, mask)


def test_forward_tile_rule(monkeypatch) -> None:
    """A bucket's thin tile gives way to POINTWISE_CONFIG on products at least 128 on
    both sides, unless an exact-shape entry was tuned for it."""
    monkeypatch.setattr(conv_pointwise, "_INTERPRETING", False)
    thin = (16, 64, 128, 8, 4, 4)
    monkeypatch.setattr(conv_pointwise, "config_for", lambda *a: thin)
    x = _r((2, 24, 12, 11), torch.float16, 1)  # N = 132 positions
    out = torch.empty((2, 130, 12, 11), dtype=torch.float16, device=DEVICE)
    w = _r((130, 24, 1, 1), torch.float16, 2)
    y3, a, b, _ = conv_pointwise.pointwise_operands(x, w, None, out, False)
    assert conv_pointwise._pointwise_config(y3, a, b) == conv_pointwise.POINTWISE_CONFIG
    assert (
        conv_pointwise._pointwise_config(y3.float(), a.float(), b.float())
        == conv_pointwise.POINTWISE_CONFIG_F32
    )
    monkeypatch.setitem(conv_pointwise.SHAPE_CONFIGS, (2, 2, 130, 132, 24), thin)
    assert conv_pointwise._pointwise_config(y3, a, b) == thin
    small = conv_pointwise.pointwise_operands(x[:, :, :10], w, None, out[:, :, :10], False)
    assert conv_pointwise._pointwise_config(*small[:3]) == thin  # 110 positions: a thin product


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_forward_on_the_rule_tiles(dtype: torch.dtype, monkeypatch) -> None:
    """The forward computes on POINTWISE_CONFIG's tiles (several row and column tiles,
    196 = 4 x 49 positions: a multiple of 4 elements, not of 8) and with a bias."""
    monkeypatch.setattr(conv_pointwise, "_INTERPRETING", False)
    monkeypatch.setattr(conv_pointwise, "config_for", lambda *a: (16, 64, 128, 8, 4, 4))
    x, w, bias = _r((2, 24, 14, 14), dtype, 1), _r((130, 24, 1, 1), dtype, 2), _r((130,), dtype, 3)
    args = [[1, 1], [0, 0], [1, 1], False, [0, 0], 1]
    assert_matches(conv.convolution(x, w, bias, *args), aten.convolution, x, w, bias, *args)


def test_vector_multiple_is_the_largest_power_of_two() -> None:
    """196 f16 positions a row: rows start 8 bytes apart, so 4-element vectors (was 1)."""
    t = torch.empty((2, 24, 196), dtype=torch.float16)
    assert layout_of(t, 8) == (ROW, 4, (24 * 49, 49, 1))
    assert layout_of(t[:, :, :-1], 8)[1] == 4  # the stride decides, not the size
    assert layout_of(torch.empty((2, 6, 14), dtype=torch.float16), 8)[1] == 2
    assert layout_of(torch.empty((2, 6, 24), dtype=torch.float16), 8)[1] == 8
    assert [pow2_multiple(n, 8) for n in (0, 1, 6, 196, 200, 1024)] == [8, 1, 2, 4, 8, 8]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_mm_on_multiples_of_four(dtype: torch.dtype) -> None:
    """Sizes and strides that are multiples of 4 elements but not 8 (and of 2, not 4):
    the kernel multiplies them back from the passed quotients."""
    a = _r((20, 2 * 36), dtype, 1)[:, ::2]  # a row stride of 72, K = 36
    b = _r((36, 12), dtype, 2)
    assert_matches(matmul.mm(a, b), aten.mm, a, b)
    c, d = _r((18, 6), dtype, 3), _r((6, 14), dtype, 4)
    assert_matches(matmul.mm(c, d), aten.mm, c, d)


def _views(t: torch.Tensor, start: int) -> bool:
    """PyTorch's own verdict: whether dims ``start..`` of ``t`` merge in a ``view``."""
    try:
        t.view(*t.shape[:start], math.prod(t.shape[start:]))
    except RuntimeError:
        return False
    return True


def test_merges_agrees_with_view() -> None:
    """``conv_pointwise.merges`` decides from the strides what ``view`` decides by trying
    (its refusal costs a C++ backtrace a call): over permuted, sliced, expanded, empty and
    unit-dim layouts, both give the same answer (on an empty tensor ``merges`` may say no
    where ``view`` says yes, never the reverse)."""
    g = torch.Generator().manual_seed(0)
    seen = {True: 0, False: 0}
    for _ in range(400):
        shape = [int(s) for s in torch.randint(0, 5, (4,), generator=g)]
        t = torch.empty(shape)
        choice = int(torch.randint(0, 4, (1,), generator=g))
        if choice == 1:
            t = t.permute(*torch.randperm(4, generator=g).tolist())
        elif choice == 2:
            t = torch.empty([s * 2 for s in shape])[::2, :, ::2, :]
        elif choice == 3:
            t = torch.empty(shape[0], 1, shape[2], shape[3]).expand(shape)
        for start in (1, 2):
            want = _views(t, start)
            got = conv_pointwise.merges(t.shape[start:], t.stride()[start:])
            # an empty tensor views into anything; the strides of its other dims cannot
            # tell, so there ``merges`` need only never claim a view that fails
            assert got == want or (t.numel() == 0 and want), (tuple(t.shape), t.stride(), start)
            seen[want] += 1
    assert min(seen.values()) > 50  # both answers were exercised


@pytest.mark.parametrize("layout", ["nchw", "channels_last"])
def test_planned_repeat_calls_agree_with_eager(layout: str) -> None:
    """A pointwise convolution's second call with the same signature runs from its plan
    (strided views of the new operands): on new values, read at another storage offset,
    forward and weight gradient still match eager; another layout gets a plan of its own."""
    conv._FORWARD_PLANS.clear()
    conv_backward._POINTWISE_WGRAD_PLANS.clear()
    fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
    rest = ([1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    for seed in (0, 1):
        # the second call's operands start one image in: a non-zero storage offset
        x = _r((2, 12, 5, 6), torch.float32, seed).contiguous(memory_format=fmt)
        if seed:
            x = torch.cat([torch.zeros_like(x[:1]), x]).contiguous(memory_format=fmt)[1:]
        w, b = _r((10, 12, 1, 1), torch.float32, seed + 5), _r((10,), torch.float32, seed + 7)
        assert_matches(conv.convolution(x, w, b, *rest), aten.convolution, x, w, b, *rest)
        assert x.storage_offset() == (x[0].numel() if seed else 0)
        gy = _r((2, 10, 5, 6), torch.float32, seed + 9).contiguous(memory_format=fmt)
        got = conv_backward.convolution_backward(gy, x, w, [10], *rest, [True, True, True])
        want = aten.convolution_backward(gy, x, w, [10], *rest, [True, True, True])
        for g, e in zip(got, want):
            torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-4)
    assert len(conv_backward._POINTWISE_WGRAD_PLANS) == 1
    # forward plans: the forward's and the input gradient's (a transposed product)
    assert len(conv._FORWARD_PLANS) == 2
