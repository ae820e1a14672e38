"""Pointwise (1x1, stride 1, unpadded, one group) convolutions on the matmul kernel, for
:mod:`opbench.kernels._lib.conv`: a forward (or a transposed one, or an input gradient)
is a product per image, ``out[n] = W @ x[n]``, read where the operands lie (NCHW or
channels-last); a weight gradient sums ``a[n] @ b[n]^T`` over the images, through
per-image fp32 partials or the matmul kernel's batch-summing mode. The tuning constants
(``POINTWISE_*``) live here: ``benchmarks/reproduce/device_profile.py --set
conv_pointwise.NAME=VALUE`` and the tests set them."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from opbench.kernels._lib import matmul_lanes
from opbench.kernels._lib.channels_last_copy import channels_last_rows
from opbench.kernels._lib.launch import INTERPRETING as _INTERPRETING
from opbench.kernels._lib.launch import remember
from opbench.kernels._lib.matmul import (
    SHAPE_CONFIGS,
    config_for,
    matmul_into,
    matmul_ruled_into,
    sum_split_partials,
)
from opbench.kernels._lib.matmul_batch_sum import matmul_batch_sum_into
from opbench.kernels._lib.matmul_lanes import run_lane

__all__ = [
    "ForwardPlan",
    "WeightGradPlan",
    "forward_plan",
    "merges",
    "pointwise_forward",
    "pointwise_operands",
    "pointwise_weight_grad",
    "view_spec",
    "weight_grad_plan",
]


#: Forward tiles of a pointwise convolution, ``(BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M,
#: num_warps, num_stages)`` of the matmul kernel, 16-bit and float32, used where no tuned
#: exact-shape entry (``matmul.SHAPE_CONFIGS``) exists and the bucket's config has a side
#: under :data:`POINTWISE_MIN_TILE` while the product is at least twice that on both
#: sides (:func:`_pointwise_config`). The buckets were tuned on other products: on the
#: H100, ``[32, 1024, 14, 14]`` into 512 channels (``W @ x[n]``: 32 x 512 x 196 x 1024)
#: got bucket 2:2:2:3's 16x64 tile and ran at 0.18x eager (0.221 ms against 0.040),
#: where its 1024-channel twin on 128x128 tiles reached 0.63x. 128 x 64, not 128 x 128:
#: an image's 196 positions fill 4 columns of 64 (23% masked off) but 2 of 128 (35%).
#: Untimed on a GPU: ``benchmarks/probes/pointwise_conv_probe.py`` times it and sweeps others.
POINTWISE_CONFIG = (128, 64, 64, 8, 4, 4)
POINTWISE_CONFIG_F32 = (64, 64, 32, 8, 4, 3)
POINTWISE_MIN_TILE = 64
#: Serve a pointwise convolution of one position an image (``[128, 1536, 1, 1]``, a
#: squeeze-and-excite block's) as one product over the images, ``W @ [C_in, N]``, not a
#: product per image one column wide: on an H200 (2026-11-29) the products of the tuning
#: half's ``[128, 768 <-> 1536, 1, 1]`` backward rows took 75 us where cuDNN took 13
#: (0.165x eager), every image's product reading the whole weight again.
POINTWISE_MERGE_SINGLE_POSITION = True
#: Serve a pointwise convolution's products (the forward and the input gradient, a product
#: per image; the weight gradient where the images merge into one product) by the matmul
#: shape rule (:func:`~opbench.kernels._lib.matmul.matmul_ruled_into`, fitted on the
#: matmul family's traced products) rather than the tables above. Off: on an H200
#: (2026-11-29, ``pw-ruled-h200-2026-11-29.md``, 20 rows of each half and op) the tuning
#: half's forward gained device time (1.116x -> 1.169x eager) and lost host time
#: (``do_bench`` 1.024x -> 0.99x: the rule's ranking is per call), its backward lost both
#: (0.724x -> 0.718x, 0.61x -> 0.577x).
POINTWISE_RULED = False


def _pointwise(ksize: Sequence[int], stride: Sequence[int], padding: Sequence[int],
               output_padding: Sequence[int], groups: int) -> bool:  # fmt: skip
    """A 1x1 kernel, stride 1, no padding, one group: a matrix product per image."""
    return (
        groups == 1 and all(k == 1 for k in ksize) and all(s == 1 for s in stride)
        and not any(padding) and not any(output_padding)
    )  # fmt: skip


def merges(sizes: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether dims of these sizes and strides merge into one without a copy (what
    ``view`` would accept): each dim's stride is the next one's times its size, dims of
    size 1 aside. Decided from the strides, not by trying ``view``: a refused ``view``
    raises, and PyTorch's error (its C++ backtrace) cost 34 us a call on the CPU machine,
    twice in every NCHW pointwise weight gradient (``benchmarks/probes/conv_host_path.py``)."""
    if 0 in sizes:
        return True
    inner = None
    for size, stride in zip(sizes, strides):
        if size == 1:
            continue
        if inner is not None and inner != stride * size:
            return False
        inner = stride
    return True


def _per_image(t: torch.Tensor) -> torch.Tensor | None:
    """``[N, C, *spatial]`` as ``[N, C, positions]`` without a copy (contiguous and
    channels-last both merge), or None where the spatial dims do not merge."""
    if not merges(t.shape[2:], t.stride()[2:]):
        return None
    return t.view(t.shape[0], t.shape[1], math.prod(t.shape[2:]))


def pointwise_operands(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                       out: torch.Tensor, transposed: bool) -> tuple | None:  # fmt: skip
    """``(out, a, b, bias)`` of :func:`~opbench.kernels._lib.matmul.matmul_into` for a
    pointwise convolution, ``out[n] = W @ x[n]`` (``W`` ``[C_out, C_in]``, ``W^T`` for a
    transposed one): the weight's batch stride 0, the bias broadcast, every operand a view
    read where it lies (NCHW or channels-last); one product ``W @ [C_in, N]`` (batch 1)
    for one position an image (:data:`POINTWISE_MERGE_SINGLE_POSITION`). None where the
    spatial dims do not merge into one. ``benchmarks/tune/tune_matmul.py`` tunes the
    matmul buckets on these operands."""
    x3, y3 = _per_image(x), _per_image(out)
    w2 = _per_image(weight)
    if x3 is None or y3 is None or w2 is None:
        return None
    w2 = w2[:, :, 0]
    w2 = w2.t() if transposed else w2
    if POINTWISE_MERGE_SINGLE_POSITION and x3.shape[2] == 1:
        # [N, C, 1] -> [1, C, N]: one product over the images
        x3, y3 = x3.permute(2, 1, 0), y3.permute(2, 1, 0)
        a = w2.unsqueeze(0)
    else:
        a = w2.unsqueeze(0).expand(x3.shape[0], -1, -1)
    b3 = None if bias is None else bias.view(1, -1, 1).expand(y3.shape)
    return y3, a, x3, b3


def _pointwise_config(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> tuple[int, ...]:
    """The matmul configuration of a pointwise convolution's product (``a`` ``[batch, M,
    K]``, ``b`` ``[batch, K, N]``): the tuned one (exact shape, else bucket), except that a
    bucket's tile under :data:`POINTWISE_MIN_TILE` on a side gives way to
    :data:`POINTWISE_CONFIG` where M and N are both at least twice that (a thin tile
    suits a thin product, not these)."""
    B, M, K = a.shape
    N = b.shape[2]
    itemsize = a.element_size()
    cfg = config_for(itemsize, M, N, K, B)
    if (
        not _INTERPRETING
        and min(cfg[0], cfg[1]) < POINTWISE_MIN_TILE
        and min(M, N) >= 2 * POINTWISE_MIN_TILE
        and (itemsize, B, M, N, K) not in SHAPE_CONFIGS
    ):
        return POINTWISE_CONFIG_F32 if itemsize == 4 else POINTWISE_CONFIG
    return cfg


#: A view as ``Tensor.as_strided`` takes it: (sizes, strides), the storage offset the
#: viewed tensor's own.
Spec = tuple[tuple[int, ...], tuple[int, ...]]


def view_spec(t: torch.Tensor) -> Spec:
    """``t``'s view as :data:`Spec` (``Tensor.as_strided`` takes it back)."""
    return tuple(t.shape), t.stride()


@dataclass(frozen=True)
class ForwardPlan:
    """A pointwise forward's geometry, kept per call signature by
    :func:`opbench.kernels._lib.conv.convolution`: a repeat call allocates its output and
    takes four strided views (:func:`pointwise_forward`) where the first call went through the
    geometry, the layout checks and a chain of views (34 us of a 62 us call's Python on the
    CPU machine, ``benchmarks/probes/conv_host_path.py``). The tile is chosen on every call
    (:func:`_pointwise_config`), so a tuning constant set between calls still counts."""

    out: Spec
    y3: Spec
    a: Spec
    x3: Spec
    b3: Spec | None


def forward_plan(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                 out: torch.Tensor, transposed: bool) -> ForwardPlan | None:  # fmt: skip
    """The :class:`ForwardPlan` of a pointwise convolution into ``out``, or None where the
    spatial dims do not merge into one (:func:`pointwise_operands`)."""
    operands = pointwise_operands(x, weight, bias, out, transposed)
    if operands is None:
        return None
    y3, a, x3, b3 = operands
    return ForwardPlan(
        view_spec(out),
        view_spec(y3),
        view_spec(a),
        view_spec(x3),
        None if b3 is None else view_spec(b3),
    )


#: The lanes of planned pointwise products (:mod:`~opbench.kernels._lib.matmul_lanes`), by
#: ``(role, the caller's plan key)``, each with the settings (:func:`_settings`) it was made
#: under: a repeat call of a signature allocates its output and launches the product its
#: first call launched, with none of the views, the tile choice or the matmul plan in
#: between. Why: a pointwise convolution backward took 204-214 us of host time a call on
#: an H200 where eager took 62-68 and the GPU 55-73 (2026-11-30,
#: ``host-profile-heldout-h200-2026-11-30.json``), about 100 us of it Python between the
#: launches. Every view a product reads starts where its tensor does (``as_strided``
#: keeps the storage offset), so the tensors' own addresses are the lane's.
_LANES: dict[tuple, tuple[tuple, Any]] = {}


def _settings() -> tuple:
    """Every setting of this module a planned product's launch depends on, read now: a
    lane made under others (a sweep's, a test's) is not used."""
    return (POINTWISE_CONFIG, POINTWISE_CONFIG_F32, POINTWISE_MIN_TILE, POINTWISE_RULED,
            POINTWISE_WGRAD_WIDE, POINTWISE_WGRAD_TRANSPOSE_MIN, POINTWISE_PARTIALS_MAX,
            POINTWISE_MERGE_SINGLE_POSITION)  # fmt: skip


def _through_lane(role: str, key: tuple | None, pa: int, pb: int, pc: int, px: int,
                  full: Callable[[list | None], object]) -> None:  # fmt: skip
    """Launch a planned product: through the lane of ``(role, key)`` where one made under
    today's settings launches on these addresses (operands A and B, output C, the bias or
    C again), else by ``full(lane_out)`` (the full path), keeping the lane that launch
    appends (none under the interpreter). A lane declines an alignment its kernel was not
    compiled for, and launch hooks. Without ``key``, the full path and no lane."""
    if key is None:
        full(None)
        return
    lane_key = (role, key)
    hit = _LANES.get(lane_key)
    if (hit is not None and not matmul_lanes.LANES_OFF and hit[0] == _settings()
            and run_lane(hit[1], pa, pb, pc, px)):  # fmt: skip
        return
    lanes: list = []
    full(lanes)
    if lanes and not matmul_lanes.LANES_OFF:
        remember(_LANES, lane_key, (_settings(), lanes[0]))


def pointwise_forward(plan: ForwardPlan, x: torch.Tensor, weight: torch.Tensor,
                      bias: torch.Tensor | None, out: torch.Tensor | None = None,
                      key: tuple | None = None) -> torch.Tensor:  # fmt: skip
    """A pointwise convolution as the tuned matmul kernel (:func:`pointwise_operands`,
    :func:`_pointwise_config`), into ``out`` or a new output laid out as the plan's.
    Implicit GEMM reads such a weight tile across its rows (17-20x slower than cuDNN on the
    traced ``1024 x 1024`` pointwise convolutions); this is a plain matrix product. With
    ``key`` (the plan's call signature) a repeat call goes through the first call's lane
    (:data:`_LANES`)."""
    if out is None:
        out = torch.empty_strided(*plan.out, dtype=x.dtype, device=x.device)
    y = out

    def full(lanes: list | None) -> None:
        y3, a, x3 = y.as_strided(*plan.y3), weight.as_strided(*plan.a), x.as_strided(*plan.x3)
        b3 = None if plan.b3 is None else bias.as_strided(*plan.b3)
        if POINTWISE_RULED:
            matmul_ruled_into(y3, a, x3, b3, lane_out=lanes)
        else:
            matmul_into(y3, a, x3, b3, config=_pointwise_config(y3, a, x3), lane_out=lanes)

    pc = out.data_ptr()
    _through_lane("forward", key, weight.data_ptr(), x.data_ptr(), pc,
                  pc if bias is None else bias.data_ptr(), full)  # fmt: skip
    return out


def _merge_images(t: torch.Tensor) -> torch.Tensor | None:
    """``[N, C, positions]`` as ``[C, N x positions]`` without a copy (channels-last, where
    the images follow each other at a channel stride, or one image), or None."""
    if not merges((t.shape[0], t.shape[2]), (t.stride(0), t.stride(2))):
        return None
    return t.transpose(0, 1).view(t.shape[1], t.shape[0] * t.shape[2])


#: Largest fp32 workspace (bytes) of per-image weight-gradient partials of an NCHW pointwise
#: convolution (one product per image, then a fixed-order sum); beyond it the matmul
#: kernel sums the images itself. 64 MiB keeps the traced [32, 1024->512, 14, 14] (64 MiB),
#: [16, 336, 21, 21] and [16, 672, 11, 11] on partials and sends [32, 1024->1024, 14, 14]
#: (128 MiB) to the batch-summing loop, as the H100 measured them (2026-11-26). 0: the loop
#: everywhere.
POINTWISE_PARTIALS_MAX = 64 << 20
#: Give an NCHW weight gradient's per-image partial products the forward's tile rule
#: (:func:`_pointwise_config`: :data:`POINTWISE_CONFIG` where the bucket's tile has a side
#: under :data:`POINTWISE_MIN_TILE` and both output sides are at least twice that). The
#: buckets were tuned on the matmul family's products: ``[32, 512, 28, 28]``'s
#: ``512 x 512 x 784`` per image took bucket 2:2:2:3's 16 x 64 tile, a thin product's.
#: On an H200 (2026-11-29, ``pw-wgrad-h200-2026-11-29.md``, the 40 most used rows of each
#: half) it took the tuning half's four such rows from 0.742, 0.264, 0.296 and 0.613 to
#: 1.063, 0.517, 0.522 and 0.531 (device, x eager); the last (441 positions) is one that
#: :data:`POINTWISE_WGRAD_TRANSPOSE_MIN` sends to channels-last instead.
POINTWISE_WGRAD_WIDE = True
#: Copy an NCHW weight gradient's operands to channels-last first where an image's
#: positions are not whole 16-byte rows (441 f16 elements of a 21 x 21 image) and its
#: per-image fp32 partials would take at least this many times the bytes of the two
#: copies; the images then merge into one aligned reduction of ``N x positions`` (the
#: channels-last route). cuDNN does the same on such rows (``nchwToNhwc``, then its NHWC
#: weight-gradient GEMM). The copies cost the activations' bytes, the partials route its
#: partials' bytes (written, then summed), hence the ratio; the batch-summing loop (past
#: :data:`POINTWISE_PARTIALS_MAX`) writes no partials and keeps its operands. On the
#: tuning half (H200, 2026-11-29, ``pw-wgrad-h200-2026-11-29.md``) the copies won on every
#: partials row at ratios 0.98-7.1 (``[16, 864, 11, 11]`` 0.639 -> 1.031x eager) and lost
#: at 0.12 (``[16, 216, 42, 42]`` 0.742 -> 0.451x: there the wide tile wins) and on the
#: loop's rows (``[32, 1088 -> 800, 14, 14]`` 0.963 -> 0.785x): 0.5 lies between. None: never.
POINTWISE_WGRAD_TRANSPOSE_MIN: float | None = 0.5


@dataclass(frozen=True)
class WeightGradPlan:
    """A pointwise weight gradient's geometry (:func:`weight_grad_plan`), kept per call
    signature by :func:`opbench.kernels._lib.conv_backward.convolution_backward`'s weight gradient:
    the views each route takes, so a repeat call allocates, views and launches. Which of
    the routes runs is decided on every call (:func:`pointwise_weight_grad`), as it was."""

    dw: Spec
    #: ``dW [1, C_out, C_in]``, ``a [1, C_out, N x P]``, ``b^T [1, N x P, C_in]``: the
    #: merged reduction, or None where the images do not merge
    merged: tuple[Spec, Spec, Spec] | None
    #: ``dW [C_out, C_in]``, ``a [N, C_out, P]``, ``b^T [N, P, C_in]``
    per_image: tuple[Spec, Spec, Spec]


def weight_grad_plan(a: torch.Tensor, b: torch.Tensor, dw: torch.Tensor) -> WeightGradPlan | None:
    """The :class:`WeightGradPlan` of ``dW = sum_n a[n] @ b[n]^T`` into ``dw``, or None
    where the views do not exist."""
    a3, b3, dw3 = _per_image(a), _per_image(b), _per_image(dw)
    if a3 is None or b3 is None or dw3 is None:
        return None
    dw2 = dw3[:, :, 0]
    am, bm = _merge_images(a3), _merge_images(b3)
    merged = None
    if am is not None and bm is not None:
        merged = (
            view_spec(dw2.unsqueeze(0)),
            view_spec(am.unsqueeze(0)),
            view_spec(bm.t().unsqueeze(0)),
        )
    return WeightGradPlan(
        view_spec(dw), merged, (view_spec(dw2), view_spec(a3), view_spec(b3.transpose(1, 2)))
    )


def _copies_pay(partial_bytes: int, a3: torch.Tensor, b3t: torch.Tensor) -> bool:
    """Whether the per-image products' rows (``positions`` elements: ``a3`` ``[N, C_out,
    P]``, ``b3t`` ``[N, P, C_in]``) are not whole 16-byte vectors and their partials
    would take at least :data:`POINTWISE_WGRAD_TRANSPOSE_MIN` times the bytes of copying
    both operands channels-last."""
    if POINTWISE_WGRAD_TRANSPOSE_MIN is None:
        return False
    images, rows, positions = a3.shape
    size = a3.element_size()
    if positions <= 1 or positions * size % 16 == 0:
        return False
    copied = images * positions * (rows + b3t.shape[2]) * size
    return partial_bytes >= POINTWISE_WGRAD_TRANSPOSE_MIN * copied


def _merged_channels_last(t: torch.Tensor, spec: Spec) -> torch.Tensor | None:
    """``t`` (its per-image view ``spec``: ``[N, C, P]``) copied channels-last and viewed
    as ``[C, N x P]`` (stride ``(1, C)``): the images one reduction. None where the copy
    does not apply (positions not adjacent, channels dense already)."""
    (n, c, p), (sn, sc, sp) = spec
    if sp != 1:  # positions a step apart (a strided slice): the copy reads them dense
        return None
    rows = channels_last_rows(t, n, c, p, sn, sc)
    return None if rows is None else rows.as_strided((c, n * p), (1, c))


def pointwise_weight_grad(plan: WeightGradPlan, a: torch.Tensor, b: torch.Tensor,
                          dw: torch.Tensor | None = None, key: tuple | None = None,
                          ) -> torch.Tensor:  # fmt: skip
    """The weight gradient of a pointwise convolution, ``dW = sum_n a[n] @ b[n]^T``, into
    ``dw`` or a new one laid out as the plan's. Channels-last operands (and a batch of one)
    merge the images into one reduction of ``N x positions``: a plain product (split over
    K by matmul's own rule). Otherwise the matmul kernel's batch-summing mode
    (:func:`matmul_batch_sum_into`) walks every image's positions in one loop,
    accumulating in registers; the old path, a product per image into fp32 partials
    ``[N, C_out, C_in]`` summed afterwards, wrote and read back 134 MB for ``[32, 1024,
    14, 14]`` into 1024 channels and ran at 0.24x eager on the H100 (0.593 ms against
    0.141). That old path stays where its partials take at most
    :data:`POINTWISE_PARTIALS_MAX` bytes: on the H100 it ran the smaller traced cases far
    faster than the batch-summing loop (whole backward of [16, 672, 11, 11]: 0.072 ms,
    where the loop's weight gradient alone took 0.22-0.27 in ``pointwise_conv_probe.py
    --sweep``). Partials rows of unaligned positions copy both operands channels-last
    instead where :data:`POINTWISE_WGRAD_TRANSPOSE_MIN` says the copies cost less. With
    ``key`` (the plan's call signature) a repeat call launches the merged product (of the
    operands, or of their copies) through the first call's lane (:data:`_LANES`)."""
    if dw is None:
        dw = torch.empty_strided(*plan.dw, dtype=a.dtype, device=a.device)
    if plan.merged is not None:
        d, m, n = plan.merged
        product = matmul_ruled_into if POINTWISE_RULED else matmul_into
        pw = dw.data_ptr()
        _through_lane("weight grad", key, a.data_ptr(), b.data_ptr(), pw, pw,
                      lambda lanes: product(dw.as_strided(*d), a.as_strided(*m),
                                            b.as_strided(*n), lane_out=lanes))  # fmt: skip
        return dw
    d, m, n = plan.per_image
    dw2, a3, b3t = dw.as_strided(*d), a.as_strided(*m), b.as_strided(*n)
    images, r, c = a3.shape[0], a3.shape[1], b3t.shape[2]
    partial_bytes = images * r * c * 4
    if partial_bytes > POINTWISE_PARTIALS_MAX:
        matmul_batch_sum_into(dw2, a3, b3t)
        return dw
    if _copies_pay(partial_bytes, a3, b3t):
        (_, positions, _), (sn, sp, sc) = n  # b^T's view: b's own is [N, C_in, P]
        am = _merged_channels_last(a, m)
        bm = _merged_channels_last(b, ((images, c, positions), (sn, sc, sp)))
        if am is not None and bm is not None:
            pw = dw.data_ptr()
            _through_lane(
                "weight grad of the copies", key, am.data_ptr(), bm.data_ptr(), pw, pw,
                lambda lanes: matmul_into(dw2.unsqueeze(0), am.unsqueeze(0), bm.t().unsqueeze(0),
                                          lane_out=lanes),
            )  # fmt: skip
            return dw
    partials = torch.empty((images, r, c), dtype=torch.float32, device=dw.device)
    config = _pointwise_config(partials, a3, b3t) if POINTWISE_WGRAD_WIDE else None
    matmul_into(partials, a3, b3t, config=config)
    sum_split_partials(partials.view(images, -1), dw2)
    return dw
