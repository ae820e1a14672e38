"""Batch norm's backward (``native_batch_norm_backward``): its Triton kernels, their
launchers and the ATen-schema entry point, on the layout, tiling and plan helpers of
:mod:`opbench.kernels._lib.batch_norm` (the forward), which its docstring describes.
Split from the forward's module when the two passed 750 lines together; the launches
each call makes are in :func:`batch_norm_backward`'s docstring.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import triton
import triton.language as tl

from opbench.kernels._lib import batch_norm as bn
from opbench.kernels._lib import batch_norm_planes as planes
from opbench.kernels._lib.batch_norm import (
    _alloc_like,
    _bn_check_param,
    _bn_offsets,
    _bn_shape,
    _bn_tiling,
    _fold,
    _like_format,
    _ncs,
    _ncs_or_copy,
    _rkey,
    merge_rows,
    planes_layout,
    row_channels,
    row_vector,
    rows_strides,
    split_tile,
)
from opbench.kernels._lib.launch import Launcher, cdiv, jit_unspecialized, remember
from opbench.kernels._lib.native_launch import declare_replay
from opbench.kernels._lib.norm import compute_types, inv_sqrt, sum_f
from opbench.kernels._lib.pointwise import index_type

__all__ = ["batch_norm_backward"]


@triton.jit
def _bn_invstd(ptr, cs, cmask, stride, eps, RUNNING: tl.constexpr, COMPUTE: tl.constexpr):
    """invstd of channels ``cs``: saved (``ptr`` is save_invstd), or from the running
    variance (``ptr`` is running_var) when RUNNING."""
    v = tl.load(ptr + cs * stride, mask=cmask, other=0.0).to(COMPUTE)
    if RUNNING:
        v = inv_sqrt(v + tl.cast(eps, COMPUTE))
    return v


@jit_unspecialized
def _bn_bwd_reduce_kernel(
    dy_ptr, x_ptr, mean_ptr, part_ptr,
    C: tl.int64, S: tl.int64, R: tl.int64,
    xsN: tl.int64, xsC: tl.int64, xsS: tl.int64, gsN: tl.int64, gsC: tl.int64, gsS: tl.int64,
    rows_per_split: tl.int64, n_cblocks: tl.int64, split: tl.int64, mean_stride: tl.int64,
    MERGED: tl.constexpr, CV: tl.constexpr, COMPUTE: tl.constexpr, BLOCK_R: tl.constexpr,
    BLOCK_C: tl.constexpr,
):  # fmt: skip
    """Per channel and row range: sum(dy) and sum(dy * (x - mean)) into part[2, split, C]."""
    pid = tl.program_id(0).to(tl.int64)
    pid_c = pid % n_cblocks
    pid_s = pid // n_cblocks
    C = row_channels(C, CV)
    cs = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    cmask = cs < C
    mean = tl.load(mean_ptr + cs * mean_stride, mask=cmask, other=0.0).to(COMPUTE)
    r0 = pid_s * rows_per_split
    r1 = tl.minimum(r0 + rows_per_split, R)
    s_dy = tl.full([BLOCK_R, BLOCK_C], 0, COMPUTE)
    s_dyx = tl.full([BLOCK_R, BLOCK_C], 0, COMPUTE)
    for start in range(r0, r1, BLOCK_R):
        rs = start + tl.arange(0, BLOCK_R)
        mask = (rs < r1)[:, None] & cmask[None, :]
        x = tl.load(x_ptr + _bn_offsets(rs, cs, S, xsN, xsC, xsS, MERGED, CV), mask=mask, other=0.0)
        dy = tl.load(
            dy_ptr + _bn_offsets(rs, cs, S, gsN, gsC, gsS, MERGED, CV), mask=mask, other=0.0
        )
        dy = dy.to(COMPUTE)
        s_dy += dy
        s_dyx += tl.where(mask, dy * (x.to(COMPUTE) - mean[None, :]), 0.0)
    off = pid_s * C + cs
    tl.store(part_ptr + off, sum_f(s_dy, axis=0), mask=cmask)
    tl.store(part_ptr + split * C + off, sum_f(s_dyx, axis=0), mask=cmask)


@triton.jit
def _bn_bwd_sums(
    part_ptr, invstd, dw_ptr, db_ptr, cs, cmask, wmask, C, split,
    DW: tl.constexpr, DB: tl.constexpr, COMPUTE: tl.constexpr, BLOCK: tl.constexpr,
    BLOCK_S: tl.constexpr,
):  # fmt: skip
    """(sum(dy), sum(dy * (x - mean))) of channels ``cs`` from the partials
    part[2, split, C], ``BLOCK_S`` splits a step (``batch_norm.BN_MERGE_TILE`` says
    why); grad_weight and grad_bias written where ``wmask``."""
    js = tl.arange(0, BLOCK_S)
    a_dy = tl.full([BLOCK_S, BLOCK], 0, COMPUTE)
    a_dyx = tl.full([BLOCK_S, BLOCK], 0, COMPUTE)
    for j0 in range(0, split, BLOCK_S):
        m, off = split_tile(j0, js, split, cs, cmask, C)
        a_dy += tl.load(part_ptr + off, mask=m, other=0.0)
        a_dyx += tl.load(part_ptr + split * C + off, mask=m, other=0.0)
    s_dy = sum_f(a_dy, axis=0)
    s_dyx = sum_f(a_dyx, axis=0)
    if DW:
        tl.store(dw_ptr + cs, (s_dyx * invstd).to(dw_ptr.dtype.element_ty), mask=wmask)
    if DB:
        tl.store(db_ptr + cs, s_dy.to(db_ptr.dtype.element_ty), mask=wmask)
    return s_dy, s_dyx


@jit_unspecialized
def _bn_bwd_finalize_kernel(
    part_ptr, invstd_ptr, dw_ptr, db_ptr,
    C: tl.int64, split: tl.int64, sums_off: tl.int64, inv_stride: tl.int64, eps: tl.float64,
    RUNNING: tl.constexpr, SUMS: tl.constexpr, DW: tl.constexpr, DB: tl.constexpr,
    COMPUTE: tl.constexpr, BLOCK: tl.constexpr, BLOCK_S: tl.constexpr,
):  # fmt: skip
    """grad_weight and grad_bias from the partials; with SUMS, also sums[2, C] at
    ``part_ptr + sums_off`` for an apply kernel that does not merge them itself."""
    pid = tl.program_id(0).to(tl.int64)
    cs = pid * BLOCK + tl.arange(0, BLOCK)
    cmask = cs < C
    invstd = tl.full([BLOCK], 0, COMPUTE)
    if DW:
        invstd = _bn_invstd(invstd_ptr, cs, cmask, inv_stride, eps, RUNNING, COMPUTE)
    s_dy, s_dyx = _bn_bwd_sums(
        part_ptr, invstd, dw_ptr, db_ptr, cs, cmask, cmask, C, split, DW, DB, COMPUTE, BLOCK,
        BLOCK_S,
    )  # fmt: skip
    if SUMS:
        tl.store(part_ptr + sums_off + cs, s_dy, mask=cmask)
        tl.store(part_ptr + sums_off + C + cs, s_dyx, mask=cmask)


# Like batch_norm._bn_apply_kernel's arguments, kept apart: the backward's dx, dw, db
@jit_unspecialized
def _bn_bwd_apply_kernel(
    dy_ptr, x_ptr, mean_ptr, invstd_ptr, w_ptr, part_ptr, dx_ptr, dw_ptr, db_ptr,
    C: tl.int64, S: tl.int64, R: tl.int64,
    xsN: tl.int64, xsC: tl.int64, xsS: tl.int64, gsN: tl.int64, gsC: tl.int64, gsS: tl.int64,
    osN: tl.int64, osC: tl.int64, osS: tl.int64, n_cblocks: tl.int64, split: tl.int64,
    sums_off: tl.int64, mean_stride: tl.int64, inv_stride: tl.int64, eps: tl.float64,
    TRAINING: tl.constexpr, HAS_W: tl.constexpr, RUNNING: tl.constexpr, FOLD: tl.constexpr,
    DW: tl.constexpr, DB: tl.constexpr, MERGED: tl.constexpr, CV: tl.constexpr,
    COMPUTE: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr,
    BLOCK_S: tl.constexpr,
):  # fmt: skip
    """grad_input: training, (dy - mean(dy) - (x - mean) * invstd^2 * mean(dy * (x - mean)))
    * invstd * w; eval, dy * invstd * w. FOLD: every program sums its channels' partials
    (:func:`_bn_bwd_sums`) and the programs of the first row block write grad_weight and
    grad_bias, in place of a finalize launch; else the sums are read from sums[2, C] at
    ``part_ptr + sums_off``."""
    pid = tl.program_id(0).to(tl.int64)
    pid_c = pid % n_cblocks
    pid_r = pid // n_cblocks
    C = row_channels(C, CV)
    cs = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    cmask = cs < C
    rs = pid_r * BLOCK_R + tl.arange(0, BLOCK_R)
    mask = (rs < R)[:, None] & cmask[None, :]
    invstd = _bn_invstd(invstd_ptr, cs, cmask, inv_stride, eps, RUNNING, COMPUTE)
    scale = invstd
    if HAS_W:
        scale = scale * tl.load(w_ptr + cs, mask=cmask, other=0.0).to(COMPUTE)
    if FOLD:
        s_dy, s_dyx = _bn_bwd_sums(
            part_ptr, invstd, dw_ptr, db_ptr, cs, cmask, cmask & ((cs * 0 + pid_r) == 0),
            C, split, DW, DB, COMPUTE, BLOCK_C, BLOCK_S,
        )  # fmt: skip
    elif TRAINING:
        s_dy = tl.load(part_ptr + sums_off + cs, mask=cmask, other=0.0)
        s_dyx = tl.load(part_ptr + sums_off + C + cs, mask=cmask, other=0.0)
    dy = tl.load(dy_ptr + _bn_offsets(rs, cs, S, gsN, gsC, gsS, MERGED, CV), mask=mask, other=0.0)
    dy = dy.to(COMPUTE)
    if TRAINING:
        mean = tl.load(mean_ptr + cs * mean_stride, mask=cmask, other=0.0).to(COMPUTE)
        x = tl.load(x_ptr + _bn_offsets(rs, cs, S, xsN, xsC, xsS, MERGED, CV), mask=mask, other=0.0)
        k = s_dyx / R * invstd * invstd
        dx = (dy - (s_dy / R)[None, :] - (x.to(COMPUTE) - mean[None, :]) * k[None, :]) * scale[
            None, :
        ]
    else:
        dx = dy * scale[None, :]
    dx_off = _bn_offsets(rs, cs, S, osN, osC, osS, MERGED, CV)
    tl.store(dx_ptr + dx_off, dx.to(dx_ptr.dtype.element_ty), mask=mask)


_bn_bwd_reduce = Launcher(_bn_bwd_reduce_kernel)
_bn_bwd_finalize = Launcher(_bn_bwd_finalize_kernel)
_bn_bwd_apply = Launcher(_bn_bwd_apply_kernel)


# key -> (grad_input's channels-last format or None, its [N, C, S] strides or None
# (written through a contiguous copy), statistics from the running ones, input needs a
# copy, grad_out needs a copy, zero parameter gradients (no rows), scratch elements,
# buffer dtype, reduce launch, finalize launch, apply launch: each (grid, ints,
# constexprs) or None)
_BN_BWD_PLANS: dict[tuple, tuple] = {}


def _empty_param_grads(input: torch.Tensor, weight: Any) -> bool:
    """CUDA eager returns grad_weight and grad_bias of an absent weight as empty ``[0]``
    tensors in the accumulate type (seen on the H100, torch 2.11: ``((0,), float32)`` for
    float32 and float16 inputs), where the CPU returns ``[C]`` sums; the kernels then
    compute neither. Where CUDA eager raises instead (some masks of the general reduce
    path: "tensor does not have a device"), ours returns the same empties."""
    return weight is None and input.is_cuda


def _channels_last_kernels(t: torch.Tensor) -> bool:
    """ATen's ``batch_norm_use_channels_last_kernels``: the layouts CUDA eager's batch norm
    runs through its channels-last kernels, 2-D ``[N, C]`` inputs included (channels
    innermost)."""
    return (
        t.is_contiguous(memory_format=torch.channels_last)
        or t.is_contiguous(memory_format=torch.channels_last_3d)
        or (t.is_contiguous() and t.dim() > 1 and t.stride(1) == 1)
    )


def _fits_int32(t: torch.Tensor) -> bool:
    """ATen's ``canUse32BitIndexMath`` (every offset below 2**31)."""
    return 1 + sum((n - 1) * abs(s) for n, s in zip(t.shape, t.stride())) <= 2**31 - 1


def _cuda_fused(
    grad_out: torch.Tensor, input: torch.Tensor, train: bool, output_mask: Sequence[bool]
) -> bool:
    """Whether CUDA eager's native_batch_norm_backward takes its fused kernel
    (``batch_norm_backward_cuda_template``): a reduction needed, grad_input asked for, an
    input its channels-last kernels do not serve and 32-bit offsets."""
    needs_reduction = bool(train) or bool(output_mask[1]) or bool(output_mask[2])
    small = _fits_int32(input) and _fits_int32(grad_out)
    return needs_reduction and bool(output_mask[0]) and small and not _channels_last_kernels(input)


def _reads_running(
    train: bool, has_running: bool, has_saved: bool, fused: bool, cuda: bool
) -> bool:
    """Whether eager's batch norm backward reads the running statistics (else the saved
    ones). Training always reads the saved. In eval mode the CPU reads the running ones;
    CUDA eager (``batch_norm_backward_cuda``, ATen's Normalization.cu) reads them only in
    its fused kernel, and elsewhere (channels-last and 2-D inputs, or no reduction) reads
    save_mean and save_invstd whenever they are not empty: a trace's eval-mode backward
    with saved statistics unlike the running ones (an H200 probe, 2026-12-01: grad_input
    25x off on the channel whose two invstds differ 25x) differs by device."""
    if train or not has_running:
        return False
    return not (cuda and has_saved and not fused)


def _cuda_returns(
    grad_out: torch.Tensor,
    input: torch.Tensor,
    weight: Any,
    stats: tuple[Any, Any],
    train: bool,
    output_mask: Sequence[bool],
    cuda: bool,
) -> tuple[tuple[bool, bool, bool], bool]:
    """Which of (grad_input, grad_weight, grad_bias) eager's native_batch_norm_backward
    returns on this device, and whether its grad_input is contiguous whatever the input's
    layout. The CPU follows ``output_mask`` and the input's layout. CUDA eager
    (``batch_norm_backward_cuda`` in ATen's Normalization.cu, the same from torch 2.1 to
    2.11) differs in two places, both seen in the H100 kernel tests:

    * outside its fused kernel (channels-last or 2-D inputs, or no reduction needed), the
      channels-last reduce path allocates and computes grad_weight and grad_bias whatever
      the mask asks, when grad_out and the input both suit its channels-last kernels;
    * in eval mode, and in the fused kernel, grad_input is allocated contiguous.

    ``stats``: the mean and invstd that path would read (saved, else running); ``cuda``:
    whether the tensors are CUDA tensors (an argument, so the CPU tests check the rules)."""
    want = tuple(bool(m) for m in output_mask)
    if not cuda:
        return want, False  # type: ignore[return-value]
    dx, dw, db = want
    needs_reduction = bool(train) or dw or db
    fused = _cuda_fused(grad_out, input, train, output_mask)
    if (
        not fused and needs_reduction and _fits_int32(grad_out)
        and _channels_last_kernels(grad_out) and _channels_last_kernels(input)
        and (weight is None or weight.is_contiguous())
        and all(s is None or s.is_contiguous() for s in stats)
    ):  # fmt: skip
        dw = db = True
    return (dx, dw, db), fused or not train


def _bn_bwd_plan(
    key: tuple,
    grad_out: torch.Tensor,
    input: torch.Tensor,
    weight: Any,
    running_mean: Any,
    running_var: Any,
    save_mean: Any,
    save_invstd: Any,
    train: bool,
    output_mask: Sequence[bool],
) -> tuple:
    N, C, S = _bn_shape(input)
    R = N * S
    compute, buf_dtype = compute_types(input.dtype)
    has_saved = (
        save_mean is not None and save_mean.numel() > 0
        and save_invstd is not None and save_invstd.numel() > 0
    )  # fmt: skip
    running = _reads_running(
        train, running_mean is not None and running_var is not None, has_saved,
        input.is_cuda and _cuda_fused(grad_out, input, train, output_mask), input.is_cuda,
    )  # fmt: skip
    stats = (save_mean, save_invstd) if has_saved else (running_mean, None)
    returns, dx_contiguous = _cuda_returns(
        grad_out, input, weight, stats, train, output_mask, input.is_cuda
    )
    want_dx, want_dw, want_db = returns
    if _empty_param_grads(input, weight):
        want_dw = want_db = False  # returned as empty tensors, nothing to compute
    dx_fmt = None if dx_contiguous else _like_format(input)
    if not (want_dx or want_dw or want_db) or C == 0:
        plan: tuple = (
            returns, dx_fmt, None, False, False, False, False, 0, buf_dtype, None, None, None,
            None,
        )  # fmt: skip
        return remember(_BN_BWD_PLANS, key, plan)
    _bn_check_param(weight, C)
    if not running and (save_mean is None or save_invstd is None or save_mean.numel() != C):
        raise RuntimeError("batch norm backward needs save_mean and save_invstd")
    x_st, copy_x = _ncs_or_copy(input)
    g_st, copy_g = _ncs_or_copy(grad_out)
    d_st = _ncs(_alloc_like(input, dx_fmt))
    ds = d_st if d_st is not None else _ncs(input.contiguous())
    train = bool(train)
    m_stride = running_mean.stride(0) if running else 1
    v_stride = running_var.stride(0) if running else 1
    if R > 0 and planes_layout(C, x_st[1]):
        p = planes.PlanesPlan(N, C, S, fuse=True)
        flags = dict(
            TRAINING=train, RUNNING=running, HAS_W=weight is not None, DX=want_dx, DW=want_dw,
            DB=want_db, UNIT_S=planes.unit_s(x_st, g_st, ds),
            IDX=index_type(input.numel(), input.shape, [input.stride(), grad_out.stride()]), COMPUTE=compute,
        )  # fmt: skip
        sums = want_dw or want_db or (want_dx and train)
        scratch = 2 * p.split * C if sums and not p.fused else 0
        on_planes = (p, (C, N, S, g_st, x_st, ds, m_stride, v_stride), flags)
        plan = (returns, dx_fmt, d_st, running, copy_x, copy_g, False, scratch, buf_dtype, None,
                None, None, on_planes)  # fmt: skip
        return remember(_BN_BWD_PLANS, key, plan)
    merged, ((xsN, xsC, xsS), g_st, (osN, osC, osS)) = rows_strides(S, x_st, g_st, ds)
    cv = row_vector(C, (xsN, xsC, xsS), g_st, (osN, osC, osS))
    block_r, block_c, n_cblocks, split, rows_per_split, warps = _bn_tiling(C, xsC, R)
    reduce = final = apply = None
    zero_params = R == 0
    scratch = 0
    fold = False
    if R > 0 and (train or want_dw or want_db):
        scratch = 2 * split * C
        reduce = (
            (n_cblocks * split,),
            (C, S, R, xsN, xsC, xsS, *g_st, rows_per_split, n_cblocks, split, m_stride),  # type: ignore[misc]
            dict(MERGED=merged, CV=cv, COMPUTE=compute, BLOCK_R=block_r, BLOCK_C=block_c,
                 num_warps=warps),
        )  # fmt: skip
        fold = want_dx and _fold(split, block_r)
        if not fold:
            sums = want_dx and train
            final = (
                (cdiv(C, bn.BN_FINALIZE_BLOCK),),
                (C, split, scratch, v_stride),
                dict(
                    RUNNING=running, SUMS=sums, DW=want_dw, DB=want_db, COMPUTE=compute,
                    BLOCK=bn.BN_FINALIZE_BLOCK, BLOCK_S=merge_rows(split, bn.BN_FINALIZE_BLOCK),
                ),
            )  # fmt: skip
            scratch += 2 * C if sums else 0
    if want_dx and R > 0:
        apply = (
            (n_cblocks * cdiv(R, block_r),),
            (C, S, R, xsN, xsC, xsS, *g_st, osN, osC, osS, n_cblocks, split, 2 * split * C,  # type: ignore[misc]
             m_stride, v_stride),
            dict(
                TRAINING=train, HAS_W=weight is not None, RUNNING=running, FOLD=fold,
                DW=fold and want_dw, DB=fold and want_db, MERGED=merged, CV=cv,
                COMPUTE=compute, BLOCK_R=block_r, BLOCK_C=block_c,
                BLOCK_S=merge_rows(split, block_c) if fold else 1, num_warps=warps,
            ),
        )  # fmt: skip
    plan = (
        returns, dx_fmt, d_st, running, copy_x, copy_g, zero_params, scratch, buf_dtype, reduce,
        final, apply, None,
    )  # fmt: skip
    return remember(_BN_BWD_PLANS, key, plan)


def batch_norm_backward(
    grad_out: torch.Tensor,
    input: torch.Tensor,
    weight: torch.Tensor | None,
    running_mean: torch.Tensor | None,
    running_var: torch.Tensor | None,
    save_mean: torch.Tensor | None,
    save_invstd: torch.Tensor | None,
    train: bool,
    eps: float,
    output_mask: Sequence[bool],
) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
    """aten::native_batch_norm_backward: (grad_input, grad_weight, grad_bias), None where
    ``output_mask`` is False, except where CUDA eager returns more, or grad_input in another
    layout (:func:`_cuda_returns`): ours returns what eager does on the input's device. Training uses the saved statistics, eval mode the running
    ones (as eager on the CPU; CUDA's saved statistics are the same values in eval),
    read by every kernel itself.

    A reduce launch and an apply launch that sums the partials itself (a finalize launch
    between them where the sums would cost it more than 1/BN_FOLD_RATIO of its reads, or
    where grad_input is not asked); eval with grad_input alone: the apply launch."""
    dev = input.device
    key = (
        input.shape, input.stride(), grad_out.stride(), input.dtype, dev, _rkey(weight),
        _rkey(running_mean), _rkey(running_var), _rkey(save_mean), _rkey(save_invstd),
        bool(train), tuple(output_mask), bn.BN_ROW_VECTORS,
    )  # fmt: skip
    plan = _BN_BWD_PLANS.get(key)
    if plan is None:
        plan = _bn_bwd_plan(
            key, grad_out, input, weight, running_mean, running_var, save_mean, save_invstd,
            train, output_mask,
        )  # fmt: skip
    (returns, dx_fmt, d_st, running, copy_x, copy_g, zero_params, scratch, bdt, reduce, final,
     apply, on_planes) = plan  # fmt: skip
    want_dx, want_dw, want_db = returns
    C = input.shape[1]
    pdt = weight.dtype if weight is not None else input.dtype
    dx = (
        None if not want_dx
        else torch.empty(input.shape, dtype=input.dtype, device=dev) if dx_fmt is None
        else torch.empty_like(input, memory_format=dx_fmt)
    )  # fmt: skip
    new = torch.zeros if zero_params else torch.empty
    n_param = C
    if _empty_param_grads(input, weight):
        n_param = 0
        pdt = torch.float32 if input.dtype in (torch.float16, torch.bfloat16) else input.dtype
    dw = new((n_param,), dtype=pdt, device=dev) if want_dw else None
    db = new((n_param,), dtype=pdt, device=dev) if want_db else None
    if n_param == 0:
        dw_k = db_k = None  # the kernels write no parameter gradient
    else:
        dw_k, db_k = dw, db
    if reduce is None and apply is None and on_planes is None:
        return dx, dw, db
    if running:
        mean, invstd = running_mean, running_var
    else:
        mean, invstd = save_mean.contiguous(), save_invstd.contiguous()  # type: ignore[union-attr]
    x = input.contiguous() if copy_x else input
    g = grad_out.contiguous() if copy_g else grad_out
    work = torch.empty((scratch,), dtype=bdt, device=dev) if scratch else x
    eps = float(eps)
    if on_planes is not None:
        p, ints, flags = on_planes
        d_dst = dx if d_st is not None or dx is None else torch.empty(
            input.shape, dtype=input.dtype, device=dev
        )  # fmt: skip
        planes.backward(
            p, g, x, mean, invstd, weight.contiguous() if weight is not None else work, work,
            d_dst if d_dst is not None else work, dw_k if dw_k is not None else work,
            db_k if db_k is not None else work, ints, eps, flags,
        )  # fmt: skip
        if d_dst is not dx:
            dx.copy_(d_dst)  # type: ignore[union-attr]
        return dx, dw, db
    if reduce is not None:
        _bn_bwd_reduce(reduce[0], (g, x, mean, work, *reduce[1]), **reduce[2])
    if final is not None:
        _bn_bwd_finalize(
            final[0],
            (work, invstd, dw_k if dw_k is not None else work, db_k if db_k is not None else work,
             *final[1], eps),
            **final[2],
        )  # fmt: skip
    if apply is not None:
        d_dst = dx if d_st is not None else torch.empty(input.shape, dtype=input.dtype, device=dev)
        _bn_bwd_apply(
            apply[0],
            (g, x, mean, invstd, weight.contiguous() if weight is not None else work, work,
             d_dst, dw_k if dw_k is not None else work, db_k if db_k is not None else work,
             *apply[1], eps),
            **apply[2],
        )  # fmt: skip
        if d_dst is not dx:
            dx.copy_(d_dst)  # type: ignore[union-attr]
    return dx, dw, db


# the gate repeats these functions' launches (native_launch.declare_replay)
declare_replay(batch_norm_backward)
