"""Convolution backward (``aten.convolution_backward``): the input gradient through the
forward kernels of :mod:`opbench.kernels._lib.conv` run the other way, the weight
gradient by its own routes, the bias gradient a sum over all but channels.

Why apart from :mod:`~opbench.kernels._lib.conv`: the weight gradient is a different GEMM
(rows the channels of ``a``, columns (channel, kernel position) pairs of ``b``, the
positions summed over) with its own routes, chosen here: a pointwise (1x1) one through
:mod:`~opbench.kernels._lib.conv_pointwise`'s planned products (and their lanes), a
depthwise one through :mod:`~opbench.kernels._lib.conv_depthwise_wgrad`, dense channels-last
ones through :mod:`~opbench.kernels._lib.conv_nhwc_wgrad`, the rest through
:func:`~opbench.kernels._lib.conv_kernels._wgrad_kernel` with the positions split across
programs as matmul's split-K. Its tiles are this module's ``WGRAD_*`` constants, which
``benchmarks/probes/conv_probe.py`` sweeps.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch

from opbench.kernels._lib.channels_last_copy import shared_copies
from opbench.kernels._lib.conv import (
    _INTERPRETING,
    _SERVED,
    _TO_F32,
    _fits_i32,
    _run_of_positions,
    convolution,
)
from opbench.kernels._lib.conv_depthwise_wgrad import DWG_TILE, depthwise_weight_grad
from opbench.kernels._lib.conv_geometry import (
    as3d,
    as5d,
    fits_i32,
    geometry,
    strides_like_channels_last,
)
from opbench.kernels._lib.conv_kernels import _wgrad
from opbench.kernels._lib.conv_nhwc_wgrad import nhwc_weight_grad
from opbench.kernels._lib.conv_pointwise import _pointwise, pointwise_weight_grad, weight_grad_plan
from opbench.kernels._lib.launch import cdiv, next_pow2, remember
from opbench.kernels._lib.matmul import split_plan
from opbench.kernels._lib.matmul_shared import sm_count, split_target, sum_split_target
from opbench.kernels._lib.native_launch import declare_replay

__all__ = ["convolution_backward"]

#: Weight-gradient tiles of :func:`~opbench.kernels._lib.conv_kernels._wgrad_kernel`:
#: columns are (channel, kernel position) pairs, ``WGRAD_BLOCK_K`` the positions summed
#: per step; rows are the group's channels of ``a`` (16 to 64).
WGRAD_BLOCK_N = 64
WGRAD_BLOCK_K = 64
WGRAD_WARPS = 4
#: Positions a step where a group has at most WGRAD_NARROW_ROWS channels of ``a`` (its
#: rows padded to tl.dot's 16): the H100 (2026-11-26, ``conv_probe.py --cases 0,1``) ran
#: the 64 groups of 8 channels' weight gradient in 0.0975 ms at 256, 0.136 at 128 and
#: 0.176 at 64 (eager 0.072), where 18 channels a group ran best at 64 (0.220; 0.256 at
#: 256). Two measured cases, not a sweep over channel counts.
WGRAD_BLOCK_K_NARROW = 256
WGRAD_NARROW_ROWS = 8
WGRAD_STAGES = 1
#: Groups of fewer channels of ``b`` than this take the kernel's ``FLAT_TAPS`` columns,
#: (channel, kernel position) pairs: a tile of one kernel position pads its channels to
#: ``tl.dot``'s 16 and every kernel position re-reads ``a``. An RGB stem's 7x7 stride-2
#: weight gradient (``[128, 3, 224, 224]``, 64 channels, tuning half) took 55 ms of
#: kernel on an H200 that way, eager 0.68 (``conv-heldout-strided-bwd-h200-2026-12-01``).
#: 48 from the tuning half's strided rows timed flat below 64 (device time, H200,
#: ``conv-heldout-strided-flat64-h200-2026-12-01``): 18, 28 and 36 channels ran their
#: weight gradients 1.5-7.4x faster flat, 56 ran 0.84x; the held-out half's 16 (in 8
#: groups), 32 and 52 ran 10.5x, 1.13x and 1.39x, judged after the choice.
WGRAD_FLAT_MAX_CHANNELS = 48
#: A's runs of positions loaded as proven vectors (the kernel's ``A_RUNS``): 2-byte loads
#: of A without it (sm_90 PTX, 2026-12-01). Timed on an H200 (2026-12-01, device time,
#: ``wgrad-a-runs-h200-2026-12-01-strided``) on the strided backward rows this path
#: serves: tuning half 1.482x (13 rows; the 7x7 RGB stems 1.3-4.1x, three 3-channel
#: stems of 16-32 outputs 0.82-0.98x), held out, judged after, 1.193x (5 rows).
WGRAD_A_RUNS = True


def _wgrad_blocks(r_g: int, columns: int, ieee: bool = False) -> tuple[int, int, int]:
    """(BLOCK_M, BLOCK_N, BLOCK_K) of the weight gradient: rows are the group's channels
    of ``a``, columns those of ``b`` (one kernel position a program), K the positions.
    Float32 (``ieee``) sums at most ``WGRAD_BLOCK_K`` positions a step: each step is one
    FMA chain, compensated only between steps (``matmul_shared.dot_acc``), and a chain of
    256 left one weight of a 4-channel stem's gradient 3.4e-5 off on the H100 where eager
    was 2.1e-6 off (past the judge's bound; ``test_conv.py``'s split-positions test)."""
    bm = min(64, max(16, next_pow2(r_g)))
    if _INTERPRETING:
        return 16, min(256, max(16, next_pow2(columns))), 256
    narrow = r_g <= WGRAD_NARROW_ROWS and not ieee
    bk = WGRAD_BLOCK_K_NARROW if narrow else WGRAD_BLOCK_K
    return bm, min(WGRAD_BLOCK_N, max(16, next_pow2(columns))), bk


#: Pointwise weight gradients' plans (:func:`_wgrad_key`).
_POINTWISE_WGRAD_PLANS: dict[tuple, object] = {}


def _wgrad_key(a: torch.Tensor, b: torch.Tensor, weight: torch.Tensor, stride: list[int],
               padding: list[int], dilation: list[int], groups: int) -> tuple:  # fmt: skip
    """What decides a weight gradient's plan: the operands' sizes, strides, dtype and
    device, the weight's, and the geometry (as :func:`geometry` gives it)."""
    return (
        a.shape, a.stride(), a.dtype, a.device, b.shape, b.stride(), b.dtype, weight.shape,
        weight.stride(), weight.dtype, tuple(stride), tuple(padding), tuple(dilation), groups,
    )  # fmt: skip


def _weight_grad(
    a: torch.Tensor, b: torch.Tensor, weight: torch.Tensor, spatial: int, stride: list[int],
    padding: list[int], dilation: list[int], groups: int,
) -> torch.Tensor:  # fmt: skip
    """The weight gradient through :func:`~opbench.kernels._lib.conv_kernels._wgrad_kernel`: ``a`` carries the weight's first
    dim's channels at the positions summed over, ``b`` is gathered at
    ``q * stride - padding + k * dilation``."""
    fmt = {4: torch.channels_last, 5: torch.channels_last_3d}.get(weight.dim())
    like_cl = fmt is not None and strides_like_channels_last(weight)
    dw = torch.empty(weight.shape, dtype=weight.dtype, device=weight.device,
                     memory_format=fmt if like_cl else torch.contiguous_format)  # fmt: skip
    if dw.numel() == 0:
        return dw
    if _pointwise(weight.shape[2:], stride, padding, [0] * spatial, groups):
        plan = weight_grad_plan(a, b, dw)
        if plan is not None:
            key = _wgrad_key(a, b, weight, stride, padding, dilation, groups)
            return pointwise_weight_grad(remember(_POINTWISE_WGRAD_PLANS, key, plan), a, b, dw,
                                         key)  # fmt: skip
    a5, b5, w5 = as5d(a, spatial), as5d(b, spatial), as5d(dw, spatial)
    (sd, sh, sw), (pd, ph, pw), (dd, dh, dw_) = as3d(spatial, stride, padding, dilation)
    QD, QH, QW = a5.shape[2:]
    PD, PH, PW = b5.shape[2:]
    KD, KH, KW = w5.shape[2:]
    R_G, C_G = weight.shape[0] // groups, weight.shape[1]
    P = a5.shape[0] * QD * QH * QW
    if C_G == 1:  # every weight row reads one gathered channel: depthwise, any multiplier
        # positions run to under 2P past the last split; the partials to splits (<= P) weights
        big = not _fits_i32(a5, b5, counts=(2 * P + DWG_TILE, dw.numel() * (max(P, 1) + 1)))
        depthwise_weight_grad(a5, b5, dw, w5, R_G, stride, padding, dilation, spatial, big)
        return dw
    if nhwc_weight_grad(a5, b5, w5, R_G, C_G, groups, [sd, sh, sw], [pd, ph, pw],
                        [dd, dh, dw_], spatial == 3, fits_i32):  # fmt: skip
        return dw
    kvol = KD * KH * KW
    flat, cols, bm, bn, bk, programs, splits, p_per_q = _wgrad_layout(
        P, R_G, C_G, kvol, groups, a.dtype == torch.float32, dw.device
    )  # fmt: skip
    # P == 0 (an empty batch): the loop is empty and the kernel writes zeros
    target = split_target(dw, splits)
    grid = (cdiv(R_G, bm), cdiv(cols, bn), programs * splits)
    vec_a = _run_of_positions(QW, bk, a5.stride(4) == 1)
    _wgrad(
        grid,
        (a5, b5, target, P, R_G, C_G, splits, p_per_q, dw.numel() if splits > 1 else 0,
         PD, PH, PW, QD, QH, QW, pd, ph, pw, dd, dh, dw_,
         *a5.stride(), *b5.stride(), *w5.stride()),
        KD=KD, KH=KH, KW=KW, SD=sd, SH=sh, SW=sw, HAS_D=spatial == 3,
        IEEE=a.dtype == torch.float32, TO_F32=_TO_F32,
        BIG=not _fits_i32(a5, b5, target, counts=(P + (p_per_q + 1) * bk, cols + bn)),
        B_POS_MAJOR=b5.stride(1) != 1,
        VEC_A=vec_a,
        VEC_P=_run_of_positions(QW, bk, a5.stride(4) == 1, b5.stride(4) == 1, sw == 1),
        FLAT_TAPS=flat,
        A_RUNS=WGRAD_A_RUNS and vec_a > 1 and all(a5.stride(i) % vec_a == 0 for i in range(4)),
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=WGRAD_WARPS, num_stages=WGRAD_STAGES,
    )  # fmt: skip
    sum_split_target(target, dw)
    return dw


class WgradLayout(NamedTuple):
    """How :func:`_weight_grad` launches its kernel: the column layout, the tile, and the
    grid's programs along axis 2 (groups, times kernel positions unless ``flat``) and
    splits of the positions."""

    flat: bool
    columns: int
    block_m: int
    block_n: int
    block_k: int
    programs: int
    splits: int
    blocks_per_split: int

    def launched(self, rows: int) -> int:
        """Programs of the whole grid over ``rows`` rows (a group's channels of ``a``)."""
        return (
            cdiv(rows, self.block_m)
            * cdiv(self.columns, self.block_n)
            * self.programs
            * self.splits
        )


def _wgrad_layout(
    P: int, R_G: int, C_G: int, kvol: int, groups: int, ieee: bool, device: torch.device
) -> WgradLayout:
    """The launch layout of :func:`_weight_grad`'s kernel: ``FLAT_TAPS`` columns for groups
    of fewer than ``WGRAD_FLAT_MAX_CHANNELS`` channels of ``b`` where the positions are
    many enough for :func:`~opbench.kernels._lib.matmul.split_k` to split them (16
    blocks), or their grid is as large as the GPU or as a kernel position a program's.

    Measured on an H200 (2026-12-01, device time): the tiny float32 ResNet of
    ``check-model`` (512 positions, 3-16 channels) ran its 6 weight gradients in 52.4 us
    a step over 1-3 flat programs each, 32.5 over a kernel position a program (CUPTI);
    RGB stems (3x3 and 7x7, 200K-1.6M positions) and a ViT's 16x16 patches ran 5-10x
    faster flat (``conv-heldout-stem-wgrad-h200-2026-12-01.md``). A first rule, a flat
    grid of the GPU's 132 programs, missed the 3x3 stems (128 programs: the splits'
    cap; per tap 0.26-0.33x eager, flat 1.6-2.7x in the run before) and the 384-channel
    patches (72 programs; per tap 0.061x): this one takes them, untimed since."""

    def plan(flat: bool) -> WgradLayout:
        cols = C_G * kvol if flat else C_G  # a program's kernel positions: all, or one
        bm, bn, bk = _wgrad_blocks(R_G, cols, ieee)
        programs = groups * (1 if flat else kvol)
        tiles = cdiv(R_G, bm) * cdiv(cols, bn) * programs
        # The weights are few and the positions summed over many (a ResNet stem: 32 x 27
        # weights over 800K positions): the positions are split across programs as
        # matmul's split-K, fp32 partials summed in a fixed order by the second kernel.
        splits, p_per_q = split_plan(tiles, cdiv(P, bk), device)
        return WgradLayout(flat, cols, bm, bn, bk, programs, splits, p_per_q)

    per_tap = plan(False)
    if C_G >= WGRAD_FLAT_MAX_CHANNELS or kvol == 1:
        return per_tap
    flat = plan(True)
    # positions enough for split_k to split them (16 blocks), or a grid as large as the
    # per-tap one's or the GPU
    long = cdiv(P, flat.block_k) >= 16
    fills = long or flat.launched(R_G) >= min(sm_count(device), per_tap.launched(R_G))
    return flat if fills else per_tap


# Like conv.convolution's arguments, kept apart: aten::convolution_backward's own schema
def convolution_backward(
    grad_output: torch.Tensor,
    input: torch.Tensor,
    weight: torch.Tensor,
    bias_sizes: Sequence[int] | None,
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    transposed: bool,
    output_padding: Sequence[int],
    groups: int,
    output_mask: Sequence[bool],
) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
    """aten::convolution_backward: (grad_input, grad_weight, grad_bias), None where
    ``output_mask`` is False. The input gradient is the forward kernel run the other way
    (a transposed convolution of ``grad_output`` for a convolution, and the reverse), the
    weight gradient :func:`~opbench.kernels._lib.conv_kernels._wgrad_kernel`, the bias gradient a sum over all but channels
    (the reduction kernels)."""
    from opbench.kernels._lib.reduction_ops import sum_dim

    dtypes = {grad_output.dtype, input.dtype, weight.dtype}
    if len(dtypes) != 1 or input.dtype not in _SERVED:
        raise NotImplementedError(f"convolution_backward on {dtypes}: PyTorch serves it")
    spatial, stride, padding, dilation, output_padding, groups = geometry(
        input, weight, stride, padding, dilation, output_padding, groups
    )
    want_gi, want_gw, want_gb = (bool(m) for m in output_mask)
    if want_gb and not want_gw and input.device.type == "cpu":
        # eager's CPU (oneDNN) kernels return the weight gradient whenever the bias's is
        # asked for, a result structure we would have to guess per backend: PyTorch serves it
        raise NotImplementedError("bias gradient without the weight's on the CPU")
    gi = gw = None
    with shared_copies():  # grad_output copied to channels-last once for both gradients
        if want_gi:
            if transposed:
                gi = convolution(grad_output, weight, None, stride, padding, dilation, False,
                                 [0] * spatial, groups)  # fmt: skip
            else:
                ksize = weight.shape[2:]
                back = [
                    i - ((o - 1) * s - 2 * p + d * (k - 1) + 1)
                    for i, o, s, p, d, k in zip(input.shape[2:], grad_output.shape[2:], stride,
                                                 padding, dilation, ksize)
                ]  # fmt: skip
                gi = convolution(grad_output, weight, None, stride, padding, dilation, True, back,
                                 groups)  # fmt: skip
            if gi.shape != input.shape:
                raise NotImplementedError("input gradient of another shape: PyTorch serves it")
        if want_gw:
            a, b = (input, grad_output) if transposed else (grad_output, input)
            key = _wgrad_key(a, b, weight, stride, padding, dilation, groups)
            plan = _POINTWISE_WGRAD_PLANS.get(key)
            gw = (_weight_grad(a, b, weight, spatial, stride, padding, dilation, groups)
                  if plan is None else pointwise_weight_grad(plan, a, b, key=key))  # fmt: skip
    gb = sum_dim(grad_output, [0, *range(2, grad_output.dim())]) if want_gb else None
    return gi, gw, gb


# the gate repeats these functions' launches (native_launch.declare_replay)
declare_replay(convolution_backward)
