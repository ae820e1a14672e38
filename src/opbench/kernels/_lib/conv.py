"""Convolution forward (``aten.convolution``) as an implicit GEMM in Triton: 1-, 2- and 3-D,
stride, padding, dilation, groups (depthwise included), transposed convolution with
``output_padding``, contiguous and channels-last layouts.

The GEMM: rows are output positions (``M = batch x output volume``), columns a group's
output channels, the reduction runs over the kernel's positions and, inside each, the
group's input channels. No im2col buffer: each ``[BLOCK_M, BLOCK_K]`` tile of the
virtual im2col matrix is loaded straight from the input, positions outside it (padding)
masked to zero. 1-D and 2-D inputs run as 3-D with unit dims (views, no copies), and
every tensor is addressed through its strides, so channels-last inputs are read where
they lie (channels contiguous: the loads along ``K`` coalesce) and the output is written
in the memory format eager picks for it.

Transposed convolution is the same loop read backwards: output position ``o`` takes
input position ``i = (o + padding - k * dilation) / stride`` when that division is exact
and ``i`` is in range, with the weight's ``[C_in, C_out / groups, ...]`` layout. Kernel
sizes and strides are compile-time constants, offsets 32-bit where the tensors allow
(``conv_kernels``' docstring says what the sm_90 code of the kernels they replace spent
its time on).

Numerics as the matmul family (:mod:`opbench.kernels._lib.matmul`): f16/bf16 on tensor
cores with fp32 accumulation, f32 in IEEE precision (eager's cuDNN uses TF32 unless the
run pins it off, which opbench does by default), the bias added in fp32 before the one
rounding; float64 and the rest declined. Tiles are module constants (``CONV_*``; the
weight gradient's ``WGRAD_*`` in :mod:`~opbench.kernels._lib.conv_backward`, which serves
``aten.convolution_backward``) that ``benchmarks/probes/conv_probe.py`` sweeps.

Dense convolutions of at least ``conv_nhwc.NHWC_MIN_CIN`` channels a group (forward, and
the input gradient of unit-stride ones) take the channels-last GEMM of
:mod:`opbench.kernels._lib.conv_nhwc` instead of the general kernel below, which reads
NCHW tiles with 2-byte gathers (0.11-0.13x cuDNN's device time on the H100 where the
channels-last one reads 0.65-0.84x); so do strided transposed convolutions of unit
dilation at any channel count (the input gradients of strided convolutions, a phase of
the output a program: 2.5x on the rows it took, H200, 2026-12-01). Fewer channels of
other convolutions and every weight gradient stay on the paths below and in
:mod:`~opbench.kernels._lib.conv_backward`.

Depthwise convolutions (one input channel per output channel, ``groups == C_in``, and
their input gradients, where each input channel feeds one output channel) take a direct
kernel instead (:mod:`opbench.kernels._lib.conv_depthwise`): the GEMM would pad both
sides of ``tl.dot`` from one channel to 16.

The ``@triton.jit`` kernels and their launchers are in
:mod:`opbench.kernels._lib.conv_kernels`, ``conv_smallk`` and ``conv_depthwise``; pointwise
(1x1) convolutions run on the matmul kernel through ``conv_pointwise``. This module picks
tiles, builds views and launches them for the ATen entry points.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch

from opbench.kernels._lib import conv_depthwise
from opbench.kernels._lib.conv_depthwise import (
    DepthwisePlan,
    _depthwise,
    depthwise_plan,
    padded_planes,
    prepared_weight,
)
from opbench.kernels._lib.conv_depthwise_cl_rows import _dw_cl_rows, cl_rows_settings
from opbench.kernels._lib.conv_depthwise_rows import _dw_rows, rows_settings
from opbench.kernels._lib.conv_geometry import (
    I32_LIMIT,
    as3d,
    as5d,
    fits_i32,
    geometry,
    out_format,
)
from opbench.kernels._lib.conv_kernels import _conv
from opbench.kernels._lib.conv_nhwc import nhwc_convolution
from opbench.kernels._lib.conv_pointwise import (
    ForwardPlan,
    Spec,
    _pointwise,
    forward_plan,
    pointwise_forward,
    view_spec,
)
from opbench.kernels._lib.conv_smallk import _smallk
from opbench.kernels._lib.launch import INTERPRETING as _INTERPRETING
from opbench.kernels._lib.launch import cdiv, next_pow2, remember
from opbench.kernels._lib.matmul_shared import sm_count
from opbench.kernels._lib.native_launch import declare_replay

__all__ = ["convolution"]

#: tiles converted to fp32 before tl.dot (the interpreter multiplies 16-bit arrays in
#: their own precision); apart from :data:`_INTERPRETING`, which picks the tiles, so a
#: test can run the GPU's tile choice under the interpreter
_TO_F32 = _INTERPRETING

_SERVED = (torch.float16, torch.bfloat16, torch.float32)


#: Forward (and input-gradient) tiles of :func:`~opbench.kernels._lib.conv_kernels._conv_kernel`
#: on the GPU: rows are output positions, columns a group's output channels (the count
#: rounded up to a power of two, at least 16, at most ``CONV_BLOCK_N_MAX``), the reduction
#: (input channel, kernel position) flattened and walked ``CONV_BLOCK_K`` at a time
#: (fewer where it is shorter). Module constants so ``benchmarks/probes/conv_probe.py`` sweeps
#: them; untimed on a GPU since the rewrite (see ``conv_kernels``' docstring).
CONV_BLOCK_M = 128
#: Rows of a tile over a channels-last input (the kernel's ``POS_COLS`` off): its
#: per-row bounds sit in a layout of many rows a thread, and 128x64 tiles spilled on
#: sm_90 (255 registers, 248 bytes of stack; 64x32: 223, none).
CONV_BLOCK_M_CL = 64
CONV_BLOCK_N_MAX = 128
CONV_BLOCK_K = 32
CONV_WARPS = 4
#: Triton's software pipeline depth; the gathers are 2-byte loads Triton cannot issue as
#: cp.async, so it should not matter (the old kernel timed the same at 1 and 3 stages).
CONV_STAGES = 1

#: The flattened-reduction kernel (:mod:`~opbench.kernels._lib.conv_smallk`) takes NCHW-like
#: convolutions whose group reduces over at most ``SMALLK_MAX_K`` (input channel, kernel
#: position) pairs (its steps are unrolled) and kernels of at most 31 positions. Tiles:
#: ``SMALLK_BLOCK_M`` positions x a group's output channels (rounded up to a power of two,
#: 16 to ``SMALLK_BLOCK_N_MAX``) x ``SMALLK_BLOCK_K`` pairs a step. sm_90 SASS of the
#: 3x3 over 18 channels, f16, 128x32x16 (162 pairs in 11 steps): Triton 3.6 121
#: registers, 2,544 instructions a program (Triton 3.9: 122, 2,216), no spills, the next
#: step's gathers issued before this step's products; untimed (``conv_probe.py``).
SMALLK_MAX_K = 1024
#: The fewest rows :func:`fill_rows` cuts the forward kernels' tiles to (``tl.dot`` takes
#: 16; at the tiles' own 128 the rule is off). Found on the tiny ResNet of ``check-model``
#: (32 took its flattened convolutions from 59.4 to 35.8 µs of kernel a step; H200,
#: CUPTI), judged on the trace rows it changes: three held-out input gradients, none of
#: the tuning half's rows (their grids fill the GPU). Device time (H200, 2026-12-01,
#: ``conv-heldout-min-block-m-h200-2026-12-01.md``): those three 1.219x faster than at
#: 128 (held-out backward on its paths 0.498x -> 0.578x eager), the 14 rows it left alone
#: 0.999-1.002x (the noise floor). An earlier ``do_bench`` reading (0.31-0.43x against
#: 0.43-0.46, ``conv-heldout-fill-rows-h200-2026-11-30.md``) moved unchanged rows by
#: 20-75%: host gaps, not the kernels.
MIN_BLOCK_M = 32
SMALLK_BLOCK_M = 128
SMALLK_BLOCK_N_MAX = 64
SMALLK_BLOCK_K = 16
SMALLK_WARPS = 4

#: Tiles of the direct depthwise kernel (:mod:`~opbench.kernels._lib.conv_depthwise`) over
#: NCHW inputs: ``DW_BLOCK_C`` channels x ``DW_BLOCK_P`` flattened output positions (a
#: warp's threads along the positions, where the input is contiguous), ``DW_WARPS`` warps.
#: Timed on an H200 on the tuning half's 8 most used depthwise forward rows (2026-11-28,
#: ``dw-fwd-tiles-h200-2026-11-28.md``, device time): 0.684x eager against 0.683 (1x1024),
#: 0.686 (2x512), 0.658 (8 warps), 0.654 (8x128): kept. sm_90 SASS
#: (Triton 3.9, f16, 3x3 stride 1, [32, 728, 19, 19]): 4x256 tiles 76 registers, no
#: spills, 7.1 instructions a tap and element in the row loop (2-byte loads: NCHW taps
#: are misaligned; each row's taps at immediate offsets), 8x128 8.0, 2x512 7.2.
DW_BLOCK_C = 4
DW_BLOCK_P = 256
DW_WARPS = 4
#: The same over channels-last inputs: ``DW_BLOCK_P_CL`` positions x ``DW_BLOCK_C_CL``
#: channels, the channels contiguous (8 f16 channels a 16-byte load where the channel
#: count and strides are multiples of 16). Timed on an H200 (2026-11-28, Triton 3.6,
#: ``benchmarks/results/conv-cl-depthwise-h200-2026-11-28.md``, ``do_bench`` of the
#: forward): on the tuning half's ``[32, 64, 56, 56]`` 3x3 row 4x64 on 2 warps 0.64x eager
#: (16x128, the SASS-counted pick before: 0.23x; 2x128 0.51x, 8x128 0.44x); held out,
#: ``[32, 512, 14, 14]`` 7x7 0.34x (16x128: 0.12x; the best, 2x256: 0.38x). Triton 3.6
#: gave 16x128 255 registers and 12 spilled (3.9: 142), 8x128 158, 4x64 78. Still far
#: from cuDNN: a tile of a few positions reuses little of its taps' input in L1, and its
#: neighbours run on other multiprocessors (a 2-D tile of rows x columns is the next step).
DW_BLOCK_P_CL = 4
DW_BLOCK_C_CL = 64
DW_WARPS_CL = 2
#: Pipeline stages of the direct kernel's loop over kernel rows: channels-last, 1-3 timed
#: the same on the H200 (``conv-cl-depthwise-h200-2026-11-28-stages.json``).
DW_STAGES = 3
DW_STAGES_CL = 3
#: The direct kernel's loop over kernel rows is unrolled (every tap's load in flight at
#: once, not a row's at a time) for kernels of at most ``DW_UNROLL_MAX_KH`` rows (NCHW;
#: channels-last ``_CL``). On an H200 (2026-11-29, Triton 3.6, device time of the kernel,
#: ``dw-unroll-h200-2026-11-29.md``), the tuning half's 8 most used depthwise forward
#: rows: 3x3 ones 15% faster (``[16, 216, 42, 42]`` 50.0 -> 42.5 us, ``[16, 864, 11,
#: 11]`` 16.3 -> 13.8, ``[16, 432, 21, 21]`` 26.0 -> 22.2), 5x5 ones 1-6% slower
#: (``[128, 1152, 7, 7]`` 122 -> 130): the limit is 3 rows. Held out, the 3x3 rows gained
#: as much (``[32, 728, 19, 19]`` 69.1 -> 59.0 us, cuDNN 19.7) and unrolled 7x7 ones lost
#: (NCHW ``[32, 768, 32, 32]`` 437 -> 532, channels-last ``[32, 512, 14, 14]`` 104 -> 124).
#: Checked on 10 rows of each half (``dw-unroll-rule-h200-2026-11-29.md``): forward device
#: 0.752x -> 0.789x eager tuning, 0.737x -> 0.786x held out. Channels-last 3x3 rows were
#: not among those timed: off there.
DW_UNROLL_MAX_KH = 3
DW_UNROLL_MAX_KH_CL = 0
#: Channels-last: a tap's weights as a whole tile (a load an element) or (off) a vector put
#: in the tile's layout through shared memory: on the H200 the vector 0.385x eager against
#: 0.336x (``[32, 512, 14, 14]`` 7x7), 0.659 against 0.632 (``[128, 64, 56, 56]`` 3x3).
DW_WEIGHT_TILE_CL = False
#: Largest channel multiplier (output channels per input channel, or for the transposed
#: kernel of an input gradient input channels per output channel) the direct kernel
#: takes; its taps are unrolled and its channels summed one by one.
DW_MAX_MULT = 8
#: Offsets from here on take 64-bit indexing (tests set it to 0 to run those kernels).
_I32_LIMIT = I32_LIMIT


def _fits_i32(*tensors: torch.Tensor, counts: Sequence[int] = ()) -> bool:
    return fits_i32(*tensors, counts=counts, limit=_I32_LIMIT)


def _blocks(
    M: int, cout_g: int, cin_g: int, pos_cols: bool, groups: int = 1, sms: int = 0
) -> tuple[int, int, int, int]:
    """(BLOCK_M, BLOCK_N, BLOCK_K, num_warps) of the forward kernel for ``M`` rows and a
    group's ``cout_g`` output and ``cin_g`` input channels (``BLOCK_K`` of them a step),
    over NCHW-like inputs as few rows a tile as fill ``sms`` multiprocessors
    (:func:`fill_rows`).
    The old kernel's H100 probe (``benchmarks/results/conv-probe-h100.md``) preferred
    narrow tiles only because each of its K steps was a 64-bit gather of 16 channels."""
    bn = min(CONV_BLOCK_N_MAX, max(16, next_pow2(cout_g)))
    bk = min(CONV_BLOCK_K, max(16, next_pow2(cin_g)))
    if _INTERPRETING:  # few, tall programs: the interpreter pays per program and per step
        return min(1024, max(16, next_pow2(M))), min(bn, 64), max(16, next_pow2(cin_g)), 4
    bm = CONV_BLOCK_M if pos_cols else CONV_BLOCK_M_CL
    if pos_cols:
        bm = fill_rows(M, cdiv(cout_g, bn) * groups, bm, sms)
    return bm, bn, bk, max(CONV_WARPS, 8 if bm * bn >= 128 * 128 else 4)


def fill_rows(M: int, cols: int, block_m: int, sms: int) -> int:
    """``block_m`` halved (down to :data:`MIN_BLOCK_M`) while ``M`` rows in tiles of it,
    times ``cols`` programs along the channels, leave some of ``sms`` multiprocessors idle.

    A small convolution's grid is its whole parallelism: the tiny float32 ResNet of
    ``check-model`` (batch 2, 3-16 channels, 16x16 to 4x4 positions: 32-512 rows) spent
    59.4 µs a step in 9 flattened small-reduction convolutions of 128-row tiles, against
    cuDNN's 4.6 µs a forward call (H200, ``model-profile-resnet-h200-2026-11-30.txt``);
    64-row tiles took 49.4 µs and 32-row 35.8 (``--set conv.SMALLK_BLOCK_M=...``), and its
    NCHW implicit GEMM 24.7 -> 14.9 µs in 64-row tiles. A rule of the grid against the SM
    count, not a table of those shapes: a convolution that fills the GPU keeps its tile."""
    while block_m > MIN_BLOCK_M and cdiv(M, block_m) * cols < sms:
        block_m //= 2
    return block_m


def _smallk_blocks(
    M: int, cout_g: int, K: int, groups: int = 1, sms: int = 0
) -> tuple[int, int, int, int]:
    """(BLOCK_M, BLOCK_N, BLOCK_K, num_warps) of the flattened-reduction kernel over
    ``M`` rows, a group's ``cout_g`` output channels and ``K`` (channel, tap) pairs, as few
    rows a tile as fill ``sms`` multiprocessors (:func:`fill_rows`)."""
    if _INTERPRETING:  # few, tall programs and one step: the interpreter pays per step
        return min(1024, max(16, next_pow2(M))), min(64, max(16, next_pow2(cout_g))), \
            max(16, next_pow2(K)), 4  # fmt: skip
    bn = min(SMALLK_BLOCK_N_MAX, max(16, next_pow2(cout_g)))
    bm = fill_rows(M, cdiv(cout_g, bn) * groups, SMALLK_BLOCK_M, sms)
    return bm, bn, SMALLK_BLOCK_K, SMALLK_WARPS


def _run_of_positions(width: int, block_m: int, *unit_strides: bool) -> int:
    """The longest aligned run (8, 4, 2 or 1) of tile rows whose input and output
    elements are neighbours in memory: the output width must split into such runs and
    every stride named must be 1 (a column stride of one element, a unit conv stride)."""
    if not all(unit_strides):
        return 1
    for v in (8, 4, 2):
        if width % v == 0 and block_m % v == 0:
            return v
    return 1


def _smallk_forward(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None,
                    y: torch.Tensor, cin_g: int, cout_g: int, groups: int, stride: list[int],
                    padding: list[int], dilation: list[int], transposed: bool,
                    has_d: bool) -> bool:  # fmt: skip
    """The convolution of 5-D views through the flattened-reduction kernel, or False
    where it does not take it: channels innermost, more than 31 kernel positions, a
    reduction past ``SMALLK_MAX_K``, weight taps not dense, or a strided transposed
    convolution (a unit-stride one runs as a forward one with padding and dilation
    negated)."""
    KD, KH, KW = w.shape[2:]
    kvol = KD * KH * KW
    ws = w.stride()
    if (
        x.stride(1) == 1 or kvol > 31 or cin_g * kvol > SMALLK_MAX_K
        or (transposed and any(s != 1 for s in stride))
        or ws[4] != 1 or (KH > 1 and ws[3] != KW) or (KD > 1 and ws[2] != KH * KW)
    ):  # fmt: skip
        return False
    sd, sh, sw = stride
    pd, ph, pw = padding
    dd, dh, dw = dilation
    if transposed:  # o + pad - k * dilation: a forward convolution of -pad, -dilation
        pd, ph, pw, dd, dh, dw = -pd, -ph, -pw, -dd, -dh, -dw
        wsn, wsc, wsg = ws[1], ws[0], cin_g * ws[0]
    else:
        wsn, wsc, wsg = ws[0], ws[1], cout_g * ws[0]
    N = x.shape[0]
    D, H, W = x.shape[2:]
    OD, OH, OW = y.shape[2:]
    M = N * OD * OH * OW
    K = cin_g * kvol
    bm, bn, bk, warps = _smallk_blocks(M, cout_g, K, groups, sm_count(x.device))
    vec = _run_of_positions(OW, bm, x.stride(4) == 1, y.stride(4) == 1, sw == 1)
    _smallk(
        (cdiv(M, bm), cdiv(cout_g, bn) * groups),
        (x, w, bias if bias is not None else y, y, M, cout_g, D, H, W, OD, OH, OW,
         pd, ph, pw, dd, dh, dw, *x.stride(), wsn, wsc, wsg, ws[4], *y.stride()),
        CIN_G=cin_g, KD=KD, KH=KH, KW=KW, SD=sd, SH=sh, SW=sw, K_STEPS=cdiv(K, bk),
        HAS_D=has_d, HAS_BIAS=bias is not None, IEEE=x.dtype == torch.float32,
        TO_F32=_TO_F32, BIG=not _fits_i32(x, w, y, counts=(M + bm, K + bk)), VEC_M=vec,
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=warps, num_stages=1,
    )  # fmt: skip
    return True


def _is_depthwise(cin_g: int, cout_g: int) -> bool:
    """Each output channel reads one input channel (``groups == C_in``: depthwise, with a
    channel multiplier ``cout_g``) or each input channel feeds one output channel (a
    depthwise convolution's input gradient, run transposed): the direct kernel's cases.
    The implicit GEMM would pad both sides of ``tl.dot`` to 16 channels."""
    return min(cin_g, cout_g) == 1 and max(cin_g, cout_g) <= DW_MAX_MULT


def _dw_blocks(M: int, C_out: int, channels_inner: bool) -> tuple[int, int, int]:
    """(BLOCK_P, BLOCK_C, num_warps) of the direct depthwise kernel."""
    if _INTERPRETING:  # few programs: the interpreter pays per program
        return min(1024, next_pow2(M)), min(64, next_pow2(C_out)), 4
    if channels_inner:
        bp, bc, warps = DW_BLOCK_P_CL, DW_BLOCK_C_CL, DW_WARPS_CL
    else:
        bp, bc, warps = DW_BLOCK_P, DW_BLOCK_C, DW_WARPS
    return min(bp, max(16, next_pow2(M))), min(bc, max(2, next_pow2(C_out))), warps


#: Forward plans by call signature (:func:`_forward_key`): a pointwise convolution's
#: :class:`~opbench.kernels._lib.conv_pointwise.ForwardPlan` or a depthwise one's
#: :class:`_DepthwiseRun`. A repeat call allocates, views and launches, where the first
#: went through the checks, the geometry and the path's choice (on the CPU machine, launches
#: stubbed: ``benchmarks/probes/conv_host_path.py``).
_FORWARD_PLANS: dict[tuple, object] = {}


def _forward_key(input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                 stride: Sequence[int], padding: Sequence[int], dilation: Sequence[int],
                 transposed: bool, output_padding: Sequence[int], groups: int) -> tuple:  # fmt: skip
    """What decides a forward's plan: the operands' sizes, strides, dtypes and device (the
    bias's too), and the geometry arguments as given (lists made tuples)."""
    return (
        input.shape, input.stride(), input.dtype, input.device, weight.shape, weight.stride(),
        weight.dtype, None if bias is None else (bias.shape, bias.stride(), bias.dtype),
        tuple(stride), tuple(padding), tuple(dilation), transposed, tuple(output_padding),
        groups,
    )  # fmt: skip


class _DepthwiseRun(NamedTuple):
    """A depthwise forward's plan (:func:`depthwise_plan`) with the views it runs on: the
    output's layout and the 5-D views of input, weight and output, and the settings it
    was made under (:func:`_dw_settings`), so that a setting changed since (a sweep's, a
    test's) makes a new one."""

    settings: tuple
    out: Spec
    x: Spec
    w: Spec
    y: Spec
    plan: DepthwisePlan


def _dw_settings() -> tuple:
    """Every setting a depthwise forward's plan depends on, read now."""
    return (DW_BLOCK_C, DW_BLOCK_P, DW_WARPS, DW_BLOCK_P_CL, DW_BLOCK_C_CL, DW_WARPS_CL,
            DW_STAGES, DW_STAGES_CL, DW_WEIGHT_TILE_CL, DW_UNROLL_MAX_KH, DW_UNROLL_MAX_KH_CL,
            _I32_LIMIT, conv_depthwise.DW_PADDED, conv_depthwise.DW_PAD_MIN_TAPS,
            conv_depthwise.DW_PAD_MAX_GROWTH, *rows_settings(), *cl_rows_settings())  # fmt: skip


def _depthwise_run(run: _DepthwiseRun, input: torch.Tensor, weight: torch.Tensor,
                   bias: torch.Tensor | None, out: torch.Tensor | None = None) -> torch.Tensor:  # fmt: skip
    """The direct depthwise kernel on ``run``'s views of these operands, into ``out`` or a
    new output laid out as the plan's."""
    if out is None:
        out = torch.empty_strided(*run.out, dtype=input.dtype, device=input.device)
    x, w, y = input.as_strided(*run.x), weight.as_strided(*run.w), out.as_strided(*run.y)
    plan = run.plan
    w = prepared_weight(w, plan.weight)
    if plan.pads is not None:  # zero-padded planes: the kernel checks no bounds
        (top, bottom, left, right), big = plan.pads
        x = padded_planes(x, top, bottom, left, right, big)
    launch = {"rows": _dw_rows, "cl_rows": _dw_cl_rows}.get(plan.kernel, _depthwise)
    launch(plan.grid, (x, w, bias if bias is not None else y, y, *plan.ints), **plan.consts)
    return out


def convolution(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    transposed: bool,
    output_padding: Sequence[int],
    groups: int,
) -> torch.Tensor:
    """aten::convolution (forward)."""
    key = _forward_key(input, weight, bias, stride, padding, dilation, transposed,
                       output_padding, groups)  # fmt: skip
    known = _FORWARD_PLANS.get(key)
    if type(known) is ForwardPlan:
        return pointwise_forward(known, input, weight, bias, key=key)
    if known is not None and known.settings == _dw_settings():
        return _depthwise_run(known, input, weight, bias)
    if input.dtype not in _SERVED or weight.dtype != input.dtype:
        raise NotImplementedError(f"convolution on {input.dtype}/{weight.dtype}: PyTorch serves it")
    if bias is not None and bias.dtype != input.dtype:
        raise NotImplementedError("a bias of another dtype: PyTorch serves it")
    spatial, stride, padding, dilation, output_padding, groups = geometry(
        input, weight, stride, padding, dilation, output_padding, groups
    )
    N, C_in = input.shape[:2]
    size_in = list(input.shape[2:])
    ksize = list(weight.shape[2:])
    if transposed:
        cin_g, cout_g = C_in // groups, weight.shape[1]
        if weight.shape[0] != C_in or C_in % groups:
            raise NotImplementedError("weight and input channels disagree: eager explains")
        size_out = [
            (i - 1) * s - 2 * p + d * (k - 1) + op + 1
            for i, s, p, d, k, op in zip(size_in, stride, padding, dilation, ksize, output_padding)
        ]
    else:
        cin_g, cout_g = weight.shape[1], weight.shape[0] // groups
        if cin_g * groups != C_in or weight.shape[0] % groups:
            raise NotImplementedError("weight and input channels disagree: eager explains")
        size_out = [
            (i + 2 * p - d * (k - 1) - 1) // s + 1
            for i, s, p, d, k in zip(size_in, stride, padding, dilation, ksize)
        ]
    if any(o <= 0 for o in size_out) or min(stride) < 1 or min(dilation) < 1:
        raise NotImplementedError("an empty or invalid output: eager explains")
    C_out = cout_g * groups
    out = torch.empty(
        (N, C_out, *size_out), dtype=input.dtype, device=input.device,
        memory_format=out_format(input, weight),
    )  # fmt: skip
    if bias is not None and bias.numel() != C_out:
        raise NotImplementedError("bias of the wrong size: eager explains")
    if out.numel() == 0:
        return out
    if _pointwise(ksize, stride, padding, output_padding, groups):
        plan = forward_plan(input, weight, bias, out, transposed)
        if plan is not None:
            return pointwise_forward(remember(_FORWARD_PLANS, key, plan), input, weight, bias,
                                     out, key)  # fmt: skip
    x, w, y = as5d(input, spatial), as5d(weight, spatial), as5d(out, spatial)
    (sd, sh, sw), (pd, ph, pw), (dd, dh, dw) = as3d(spatial, stride, padding, dilation)
    D, H, W = x.shape[2:]
    OD, OH, OW = y.shape[2:]
    KD, KH, KW = w.shape[2:]
    M = N * OD * OH * OW
    if _is_depthwise(cin_g, cout_g):
        inner = x.stride(1) == 1 and C_in > 1  # channels-last: channels contiguous
        plan = depthwise_plan(
            tuple(x.shape), x.stride(), tuple(w.shape), w.stride(), tuple(y.shape), y.stride(),
            cin_g, cout_g, (sd, sh, sw), (pd, ph, pw), (dd, dh, dw), bool(transposed), spatial,
            bias is not None, _I32_LIMIT,
            (*_dw_blocks(M, C_out, inner), DW_STAGES_CL if inner else DW_STAGES,
             DW_WEIGHT_TILE_CL, DW_UNROLL_MAX_KH_CL if inner else DW_UNROLL_MAX_KH),
        )  # fmt: skip
        run = _DepthwiseRun(_dw_settings(), view_spec(out), view_spec(x), view_spec(w),
                            view_spec(y), plan)  # fmt: skip
        return _depthwise_run(remember(_FORWARD_PLANS, key, run), input, weight, bias, out)
    if nhwc_convolution(x, w, bias, y, cin_g, cout_g, groups, [sd, sh, sw], [pd, ph, pw],
                        [dd, dh, dw], bool(transposed), spatial == 3, _I32_LIMIT):  # fmt: skip
        return out
    if _smallk_forward(x, w, bias, y, cin_g, cout_g, groups, [sd, sh, sw], [pd, ph, pw],
                       [dd, dh, dw], bool(transposed), spatial == 3):  # fmt: skip
        return out
    pos_cols = x.stride(1) != 1  # NCHW: neighbouring positions are neighbours in memory
    bm, bn, bk, warps = _blocks(M, cout_g, cin_g, pos_cols, groups, sm_count(x.device))
    grid = (cdiv(M, bm), cdiv(cout_g, bn) * groups)
    _conv(
        grid,
        (x, w, bias if bias is not None else y, y, M, cin_g, cout_g,
         D, H, W, OD, OH, OW, pd, ph, pw, dd, dh, dw,
         *x.stride(), *w.stride(), *y.stride()),
        KD=KD, KH=KH, KW=KW, SD=sd, SH=sh, SW=sw, TRANSPOSED=bool(transposed),
        HAS_D=spatial == 3, HAS_BIAS=bias is not None,
        IEEE=input.dtype == torch.float32, TO_F32=_TO_F32,
        BIG=not _fits_i32(x, w, y, counts=(M + bm, cin_g + bk)), POS_COLS=pos_cols,
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=warps, num_stages=CONV_STAGES,
    )  # fmt: skip
    return out


# the gate repeats these functions' launches (native_launch.declare_replay)
declare_replay(convolution)
