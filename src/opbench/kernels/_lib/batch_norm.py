"""Batch norm, forward and backward (``native_batch_norm``, ``native_batch_norm_backward``):
Triton kernels, their launchers and the ATen-schema entry points, on the helpers of
:mod:`opbench.kernels._lib.norm` (compute types, stat dtypes, reductions).

Numerics as in layer norm: fp32 (f64 for f64) accumulation, variance from centred
values (Chan's merge of per-tile mean and M2), running stats updated in place with the
unbiased variance. Metadata follows eager on its device: ``save_mean``/``save_invstd``
have shape ``[C]``; on CUDA the accumulate type, in eval mode a copy of ``running_mean``
and ``1/sqrt(running_var + eps)``; on the CPU the input's dtype (float32 when an f16/bf16
input has float32 parameters), and empty (``[0]``) in eval mode.

The input is viewed as ``[N, C, S]`` (spatial dims merged; contiguous NCHW has strides
``(C*S, S, 1)``, channels-last ``(S*C, 1, C)``) and worked on in tiles of
``[BLOCK_R, BLOCK_C]`` (rows ``r = n*S + s``, channels ``c``): ``BLOCK_C = 1`` when the
channel stride is not 1 (NCHW: a tile runs along ``s``), up to ``BN_BLOCK_C`` channels
when it is (channels-last, 2-D inputs). Statistics are split over ``SPLIT`` row ranges
per channel block (partial count/mean/M2 merged by a finalize kernel), so a few channels
with many rows still fill the GPU.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import triton
import triton.language as tl

from opbench.kernels._lib.launch import Launcher, cdiv
from opbench.kernels._lib.norm import (
    _INTERPRETING,
    compute_types,
    inv_sqrt,
    stat_dtype,
    sum_f,
    warps_for,
)

__all__ = ["batch_norm", "batch_norm_backward"]


#: Batch-norm tiles: elements per tile and the widest channel block (channels-last).
BN_TILE = 4096 if not _INTERPRETING else 65536
BN_BLOCK_C = 64
#: Programs the statistics pass aims for (channel blocks x row splits).
BN_TARGET_PROGRAMS = 1024 if not _INTERPRETING else 1
#: Channels per program of the finalize kernels.
BN_FINALIZE_BLOCK = 256 if not _INTERPRETING else 4096


# ----------------------------------------------------------------------------- batch norm


@triton.jit
def _bn_offsets(rs, cs, S, sN, sC, sS):
    """Memory offsets of rows ``rs`` (r = n*S + s) and channels ``cs`` in an [N, C, S]
    view with strides (sN, sC, sS)."""
    n = rs // S
    s = rs - n * S
    return (n * sN + s * sS)[:, None] + (cs * sC)[None, :]


@triton.jit
def _chan_merge(count, mean, m2, cnt, tmean, tm2):
    """Chan's merge of (count, mean, M2) with a second group's (cnt, tmean, tm2)."""
    tot = count + cnt
    delta = tmean - mean
    frac = cnt / tl.maximum(tot, 1.0)
    return tot, mean + delta * frac, m2 + tm2 + delta * delta * count * frac


@triton.jit(
    do_not_specialize=["C", "S", "R", "sN", "sC", "sS", "rows_per_split", "n_cblocks", "split"]
)
def _bn_stats_kernel(
    x_ptr, part_ptr,
    C: tl.int64, S: tl.int64, R: tl.int64, sN: tl.int64, sC: tl.int64, sS: tl.int64,
    rows_per_split: tl.int64, n_cblocks: tl.int64, split: tl.int64,
    COMPUTE: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr,
):  # fmt: skip
    """Per channel and row range: count, mean and M2 into part[3, split, C]."""
    pid = tl.program_id(0).to(tl.int64)
    pid_c = pid % n_cblocks
    pid_s = pid // n_cblocks
    cs = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    cmask = cs < C
    r0 = pid_s * rows_per_split
    r1 = tl.minimum(r0 + rows_per_split, R)
    count = tl.full([BLOCK_C], 0, COMPUTE)
    mean = tl.full([BLOCK_C], 0, COMPUTE)
    m2 = tl.full([BLOCK_C], 0, COMPUTE)
    for start in range(r0, r1, BLOCK_R):
        rs = start + tl.arange(0, BLOCK_R)
        mask = (rs < r1)[:, None] & cmask[None, :]
        x = tl.load(x_ptr + _bn_offsets(rs, cs, S, sN, sC, sS), mask=mask, other=0.0)
        x = x.to(COMPUTE)
        cnt = sum_f(tl.where(mask, 1.0, 0.0).to(COMPUTE), axis=0)
        tmean = sum_f(x, axis=0) / tl.maximum(cnt, 1.0)
        d = tl.where(mask, x - tmean[None, :], 0.0)
        count, mean, m2 = _chan_merge(count, mean, m2, cnt, tmean, sum_f(d * d, axis=0))
    off = pid_s * C + cs
    tl.store(part_ptr + off, count, mask=cmask)
    tl.store(part_ptr + split * C + off, mean, mask=cmask)
    tl.store(part_ptr + 2 * split * C + off, m2, mask=cmask)


@triton.jit(do_not_specialize=["C", "split", "rm_stride", "rv_stride"])
def _bn_finalize_kernel(
    part_ptr, rm_ptr, rv_ptr, save_mean_ptr, save_invstd_ptr, stat_ptr,
    C: tl.int64, split: tl.int64, rm_stride: tl.int64, rv_stride: tl.int64,
    eps: tl.float64, momentum: tl.float64,
    TRAINING: tl.constexpr, HAS_RUNNING: tl.constexpr, HAS_SAVE: tl.constexpr,
    COMPUTE: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    """mean and invstd per channel into stat[2, C] (and the saved statistics): merged
    from the partials when training (updating the running statistics), from the running
    statistics in eval mode."""
    pid = tl.program_id(0).to(tl.int64)
    cs = pid * BLOCK + tl.arange(0, BLOCK)
    cmask = cs < C
    e = tl.cast(eps, COMPUTE)
    if TRAINING:
        count = tl.full([BLOCK], 0, COMPUTE)
        mean = tl.full([BLOCK], 0, COMPUTE)
        m2 = tl.full([BLOCK], 0, COMPUTE)
        for j in range(0, split):
            off = j * C + cs
            cnt = tl.load(part_ptr + off, mask=cmask, other=0.0)
            mu = tl.load(part_ptr + split * C + off, mask=cmask, other=0.0)
            q = tl.load(part_ptr + 2 * split * C + off, mask=cmask, other=0.0)
            count, mean, m2 = _chan_merge(count, mean, m2, cnt, mu, q)
        invstd = inv_sqrt(m2 / tl.maximum(count, 1.0) + e)
        if HAS_RUNNING:
            m = tl.cast(momentum, COMPUTE)
            rm = tl.load(rm_ptr + cs * rm_stride, mask=cmask, other=0.0).to(COMPUTE)
            rv = tl.load(rv_ptr + cs * rv_stride, mask=cmask, other=0.0).to(COMPUTE)
            unbiased = tl.where(
                count > 1.0, m2 / tl.maximum(count - 1.0, 1.0), float("nan")
            )  # eager's for one value per channel (no NaN global: see norm._INF)
            rm = m * mean + (1.0 - m) * rm
            rv = m * unbiased + (1.0 - m) * rv
            tl.store(rm_ptr + cs * rm_stride, rm.to(rm_ptr.dtype.element_ty), mask=cmask)
            tl.store(rv_ptr + cs * rv_stride, rv.to(rv_ptr.dtype.element_ty), mask=cmask)
    else:
        mean = tl.load(rm_ptr + cs * rm_stride, mask=cmask, other=0.0).to(COMPUTE)
        var = tl.load(rv_ptr + cs * rv_stride, mask=cmask, other=0.0).to(COMPUTE)
        invstd = inv_sqrt(var + e)
    tl.store(stat_ptr + cs, mean, mask=cmask)
    tl.store(stat_ptr + C + cs, invstd, mask=cmask)
    if HAS_SAVE:
        tl.store(save_mean_ptr + cs, mean.to(save_mean_ptr.dtype.element_ty), mask=cmask)
        tl.store(save_invstd_ptr + cs, invstd.to(save_invstd_ptr.dtype.element_ty), mask=cmask)


@triton.jit(
    do_not_specialize=[
        "C", "S", "R", "xsN", "xsC", "xsS", "ysN", "ysC", "ysS", "n_cblocks",
    ]
)  # fmt: skip
def _bn_apply_kernel(
    x_ptr, y_ptr, stat_ptr, w_ptr, b_ptr,
    C: tl.int64, S: tl.int64, R: tl.int64,
    xsN: tl.int64, xsC: tl.int64, xsS: tl.int64, ysN: tl.int64, ysC: tl.int64, ysS: tl.int64,
    n_cblocks: tl.int64,
    HAS_W: tl.constexpr, HAS_B: tl.constexpr,
    COMPUTE: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr,
):  # fmt: skip
    """y = (x - mean[c]) * invstd[c] * w[c] + b[c]."""
    pid = tl.program_id(0).to(tl.int64)
    pid_c = pid % n_cblocks
    pid_r = pid // n_cblocks
    cs = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    cmask = cs < C
    rs = pid_r * BLOCK_R + tl.arange(0, BLOCK_R)
    mask = (rs < R)[:, None] & cmask[None, :]
    mean = tl.load(stat_ptr + cs, mask=cmask, other=0.0)
    scale = tl.load(stat_ptr + C + cs, mask=cmask, other=0.0)
    if HAS_W:
        scale = scale * tl.load(w_ptr + cs, mask=cmask, other=0.0).to(COMPUTE)
    shift = -mean * scale
    if HAS_B:
        shift = shift + tl.load(b_ptr + cs, mask=cmask, other=0.0).to(COMPUTE)
    x = tl.load(x_ptr + _bn_offsets(rs, cs, S, xsN, xsC, xsS), mask=mask, other=0.0)
    y = x.to(COMPUTE) * scale[None, :] + shift[None, :]
    tl.store(y_ptr + _bn_offsets(rs, cs, S, ysN, ysC, ysS), y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit(
    do_not_specialize=[
        "C", "S", "R", "xsN", "xsC", "xsS", "gsN", "gsC", "gsS", "rows_per_split",
        "n_cblocks", "split",
    ]
)  # fmt: skip
def _bn_bwd_reduce_kernel(
    dy_ptr, x_ptr, mean_ptr, part_ptr,
    C: tl.int64, S: tl.int64, R: tl.int64,
    xsN: tl.int64, xsC: tl.int64, xsS: tl.int64, gsN: tl.int64, gsC: tl.int64, gsS: tl.int64,
    rows_per_split: tl.int64, n_cblocks: tl.int64, split: tl.int64,
    COMPUTE: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr,
):  # fmt: skip
    """Per channel and row range: sum(dy) and sum(dy * (x - mean)) into part[2, split, C]."""
    pid = tl.program_id(0).to(tl.int64)
    pid_c = pid % n_cblocks
    pid_s = pid // n_cblocks
    cs = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    cmask = cs < C
    mean = tl.load(mean_ptr + cs, mask=cmask, other=0.0).to(COMPUTE)
    r0 = pid_s * rows_per_split
    r1 = tl.minimum(r0 + rows_per_split, R)
    s_dy = tl.full([BLOCK_R, BLOCK_C], 0, COMPUTE)
    s_dyx = tl.full([BLOCK_R, BLOCK_C], 0, COMPUTE)
    for start in range(r0, r1, BLOCK_R):
        rs = start + tl.arange(0, BLOCK_R)
        mask = (rs < r1)[:, None] & cmask[None, :]
        x = tl.load(x_ptr + _bn_offsets(rs, cs, S, xsN, xsC, xsS), mask=mask, other=0.0)
        dy = tl.load(dy_ptr + _bn_offsets(rs, cs, S, gsN, gsC, gsS), mask=mask, other=0.0)
        dy = dy.to(COMPUTE)
        s_dy += dy
        s_dyx += tl.where(mask, dy * (x.to(COMPUTE) - mean[None, :]), 0.0)
    off = pid_s * C + cs
    tl.store(part_ptr + off, sum_f(s_dy, axis=0), mask=cmask)
    tl.store(part_ptr + split * C + off, sum_f(s_dyx, axis=0), mask=cmask)


@triton.jit(do_not_specialize=["C", "split"])
def _bn_bwd_finalize_kernel(
    part_ptr, invstd_ptr, sums_ptr, dw_ptr, db_ptr,
    C: tl.int64, split: tl.int64,
    DW: tl.constexpr, DB: tl.constexpr, COMPUTE: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    """sums[2, C] = partials summed over the splits; grad_weight and grad_bias."""
    pid = tl.program_id(0).to(tl.int64)
    cs = pid * BLOCK + tl.arange(0, BLOCK)
    cmask = cs < C
    s_dy = tl.full([BLOCK], 0, COMPUTE)
    s_dyx = tl.full([BLOCK], 0, COMPUTE)
    for j in range(0, split):
        s_dy += tl.load(part_ptr + j * C + cs, mask=cmask, other=0.0)
        s_dyx += tl.load(part_ptr + (split + j) * C + cs, mask=cmask, other=0.0)
    tl.store(sums_ptr + cs, s_dy, mask=cmask)
    tl.store(sums_ptr + C + cs, s_dyx, mask=cmask)
    if DW:
        invstd = tl.load(invstd_ptr + cs, mask=cmask, other=0.0).to(COMPUTE)
        tl.store(dw_ptr + cs, (s_dyx * invstd).to(dw_ptr.dtype.element_ty), mask=cmask)
    if DB:
        tl.store(db_ptr + cs, s_dy.to(db_ptr.dtype.element_ty), mask=cmask)


@triton.jit(
    do_not_specialize=[
        "C", "S", "R", "xsN", "xsC", "xsS", "gsN", "gsC", "gsS", "osN", "osC", "osS",
        "n_cblocks",
    ]
)  # fmt: skip
def _bn_bwd_apply_kernel(
    dy_ptr, x_ptr, mean_ptr, invstd_ptr, w_ptr, sums_ptr, dx_ptr,
    C: tl.int64, S: tl.int64, R: tl.int64,
    xsN: tl.int64, xsC: tl.int64, xsS: tl.int64, gsN: tl.int64, gsC: tl.int64, gsS: tl.int64,
    osN: tl.int64, osC: tl.int64, osS: tl.int64, n_cblocks: tl.int64,
    TRAINING: tl.constexpr, HAS_W: tl.constexpr,
    COMPUTE: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr,
):  # fmt: skip
    """grad_input: training, (dy - mean(dy) - (x - mean) * invstd^2 * mean(dy * (x - mean)))
    * invstd * w; eval, dy * invstd * w."""
    pid = tl.program_id(0).to(tl.int64)
    pid_c = pid % n_cblocks
    pid_r = pid // n_cblocks
    cs = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    cmask = cs < C
    rs = pid_r * BLOCK_R + tl.arange(0, BLOCK_R)
    mask = (rs < R)[:, None] & cmask[None, :]
    invstd = tl.load(invstd_ptr + cs, mask=cmask, other=0.0).to(COMPUTE)
    scale = invstd
    if HAS_W:
        scale = scale * tl.load(w_ptr + cs, mask=cmask, other=0.0).to(COMPUTE)
    dy = tl.load(dy_ptr + _bn_offsets(rs, cs, S, gsN, gsC, gsS), mask=mask, other=0.0)
    dy = dy.to(COMPUTE)
    if TRAINING:
        mean = tl.load(mean_ptr + cs, mask=cmask, other=0.0).to(COMPUTE)
        s_dy = tl.load(sums_ptr + cs, mask=cmask, other=0.0)
        s_dyx = tl.load(sums_ptr + C + cs, mask=cmask, other=0.0)
        x = tl.load(x_ptr + _bn_offsets(rs, cs, S, xsN, xsC, xsS), mask=mask, other=0.0)
        k = s_dyx / R * invstd * invstd
        dx = (dy - (s_dy / R)[None, :] - (x.to(COMPUTE) - mean[None, :]) * k[None, :]) * scale[
            None, :
        ]
    else:
        dx = dy * scale[None, :]
    tl.store(
        dx_ptr + _bn_offsets(rs, cs, S, osN, osC, osS), dx.to(dx_ptr.dtype.element_ty), mask=mask
    )


_bn_stats = Launcher(_bn_stats_kernel)
_bn_finalize = Launcher(_bn_finalize_kernel)
_bn_apply = Launcher(_bn_apply_kernel)
_bn_bwd_reduce = Launcher(_bn_bwd_reduce_kernel)
_bn_bwd_finalize = Launcher(_bn_bwd_finalize_kernel)
_bn_bwd_apply = Launcher(_bn_bwd_apply_kernel)


def _ncs(t: torch.Tensor) -> tuple[int, int, int] | None:
    """Strides (sN, sC, sS) of ``t`` viewed as [N, C, S] (spatial dims merged), or None
    when the spatial dims do not merge into one stride."""
    spatial = [(t.shape[i], t.stride(i)) for i in range(2, t.dim()) if t.shape[i] != 1]
    for (_, st0), (s1, st1) in zip(spatial, spatial[1:]):
        if st0 != st1 * s1:
            return None
    s_s = spatial[-1][1] if spatial else 1
    return t.stride(0), t.stride(1), s_s


def _viewable(t: torch.Tensor) -> tuple[torch.Tensor, tuple[int, int, int]]:
    st = _ncs(t)
    if st is None:
        t = t.contiguous()
        st = _ncs(t)
        assert st is not None
    return t, st


def _suggest_like(t: torch.Tensor) -> torch.Tensor:
    """An uninitialized tensor shaped like ``t`` in ATen's ``suggest_memory_format``:
    channels-last when ``t`` is, else contiguous (eager's CPU batch norm outputs)."""
    if not t.is_contiguous():
        for fmt, nd in ((torch.channels_last, 4), (torch.channels_last_3d, 5)):
            if t.dim() == nd and t.is_contiguous(memory_format=fmt):
                return torch.empty_like(t, memory_format=fmt)
    return torch.empty(t.shape, dtype=t.dtype, device=t.device)


def _bn_blocks(C: int, s_c: int, R: int) -> tuple[int, int]:
    """(BLOCK_R, BLOCK_C): channel blocks only when channels are adjacent in memory."""
    block_c = min(BN_BLOCK_C, triton.next_power_of_2(C)) if s_c == 1 and C > 1 else 1
    block_r = min(BN_TILE // block_c, max(16, triton.next_power_of_2(max(R, 1))))
    return block_r, block_c


def _bn_split(C: int, R: int, block_r: int, block_c: int) -> tuple[int, int, int]:
    """(channel blocks, row splits, rows per split) of a reduction pass."""
    n_cblocks = cdiv(C, block_c)
    r_blocks = max(1, cdiv(R, block_r))
    split = max(1, min(r_blocks, BN_TARGET_PROGRAMS // n_cblocks))
    rows_per_split = cdiv(r_blocks, split) * block_r
    return n_cblocks, cdiv(max(R, 1), rows_per_split), rows_per_split


def _bn_param(p: torch.Tensor | None, C: int) -> torch.Tensor | None:
    if p is None:
        return None
    if p.numel() != C:
        raise RuntimeError(f"expected a tensor of {C} elements, got {list(p.shape)}")
    return p.contiguous().view(-1)


def _bn_shape(input: torch.Tensor) -> tuple[int, int, int]:
    if input.dim() < 2:
        raise RuntimeError(f"batch norm expects an input of at least 2 dims, got {input.dim()}")
    N, C = input.shape[0], input.shape[1]
    S = 1
    for s in input.shape[2:]:
        S *= s
    return N, C, S


def batch_norm(
    input: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    running_mean: torch.Tensor | None,
    running_var: torch.Tensor | None,
    training: bool,
    momentum: float,
    eps: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """aten::native_batch_norm: (out, save_mean, save_invstd); updates the running
    statistics in place when training (momentum, unbiased variance)."""
    N, C, S = _bn_shape(input)
    R = N * S
    compute, buf_dtype = compute_types(input.dtype)
    if (running_mean is None) != (running_var is None):
        raise ValueError("running_mean and running_var must either both be None or neither be None")
    if not training and running_mean is None:
        raise RuntimeError("running_mean and running_var must be defined in evaluation mode")
    if training and input.numel() == 0:
        raise RuntimeError(
            f"input tensor must have at least one element, but got input_sizes = "
            f"{list(input.shape)}"
        )
    dev = input.device
    w = _bn_param(weight, C)
    b = _bn_param(bias, C)
    for p in (running_mean, running_var):
        if p is not None and (p.dim() != 1 or p.shape[0] != C):
            raise RuntimeError(f"running statistics must have {C} elements")
    sdt = stat_dtype(input, (weight, bias, running_mean, running_var))
    on_cuda = dev.type == "cuda"
    save_len = C if (training or on_cuda) else 0
    save_mean = torch.empty((save_len,), dtype=sdt, device=dev)
    save_invstd = torch.empty((save_len,), dtype=sdt, device=dev)
    # CUDA's batch norm keeps the input's strides (empty_like), the CPU's suggests a format
    y = torch.empty_like(input) if on_cuda else _suggest_like(input)
    if C == 0:
        return y, save_mean, save_invstd
    x, (xsN, xsC, xsS) = _viewable(input)
    y_st = _ncs(y)
    y_dst = y if y_st is not None else torch.empty(input.shape, dtype=input.dtype, device=dev)
    ysN, ysC, ysS = y_st if y_st is not None else _ncs(y_dst)  # type: ignore[misc]
    block_r, block_c = _bn_blocks(C, xsC, R)
    n_cblocks, split, rows_per_split = _bn_split(C, R, block_r, block_c)
    stat = torch.empty((2, C), dtype=buf_dtype, device=dev)
    rm = running_mean if running_mean is not None else stat
    rv = running_var if running_var is not None else stat
    rm_stride = running_mean.stride(0) if running_mean is not None else 1
    rv_stride = running_var.stride(0) if running_var is not None else 1
    part = stat
    if training:
        part = torch.empty((3, split, C), dtype=buf_dtype, device=dev)
        _bn_stats(
            (n_cblocks * split,),
            (x, part, C, S, R, xsN, xsC, xsS, rows_per_split, n_cblocks, split),
            COMPUTE=compute, BLOCK_R=block_r, BLOCK_C=block_c,
            num_warps=warps_for(block_r * block_c),
        )  # fmt: skip
    _bn_finalize(
        (cdiv(C, BN_FINALIZE_BLOCK),),
        (part, rm, rv, save_mean if save_len else stat, save_invstd if save_len else stat, stat,
         C, split, rm_stride, rv_stride, float(eps), float(momentum)),
        TRAINING=bool(training), HAS_RUNNING=running_mean is not None, HAS_SAVE=save_len > 0,
        COMPUTE=compute, BLOCK=BN_FINALIZE_BLOCK,
    )  # fmt: skip
    if R > 0:
        _bn_apply(
            (n_cblocks * cdiv(R, block_r),),
            (x, y_dst, stat, w if w is not None else stat, b if b is not None else stat,
             C, S, R, xsN, xsC, xsS, ysN, ysC, ysS, n_cblocks),
            HAS_W=w is not None, HAS_B=b is not None, COMPUTE=compute,
            BLOCK_R=block_r, BLOCK_C=block_c, num_warps=warps_for(block_r * block_c),
        )  # fmt: skip
        if y_dst is not y:
            y.copy_(y_dst)
    return y, save_mean, save_invstd


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
    ``output_mask`` is False. Training uses the saved statistics, eval mode the running
    ones (as eager on the CPU; CUDA's saved statistics are the same values in eval)."""
    N, C, S = _bn_shape(input)
    R = N * S
    compute, buf_dtype = compute_types(input.dtype)
    want_dx, want_dw, want_db = (bool(m) for m in output_mask)
    dev = input.device
    pdt = weight.dtype if weight is not None else input.dtype
    dx = _suggest_like(input) if want_dx else None
    dw = torch.empty((C,), dtype=pdt, device=dev) if want_dw else None
    db = torch.empty((C,), dtype=pdt, device=dev) if want_db else None
    if not (want_dx or want_dw or want_db) or C == 0:
        return dx, dw, db
    w = _bn_param(weight, C)
    stat = torch.empty((2, C), dtype=buf_dtype, device=dev)
    if train or running_mean is None or running_var is None:
        if save_mean is None or save_invstd is None or save_mean.numel() != C:
            raise RuntimeError("batch norm backward needs save_mean and save_invstd")
        mean = save_mean.contiguous()
        invstd = save_invstd.contiguous()
    else:
        _bn_finalize(
            (cdiv(C, BN_FINALIZE_BLOCK),),
            (stat, running_mean, running_var, stat, stat, stat, C, 1,
             running_mean.stride(0), running_var.stride(0), float(eps), 0.0),
            TRAINING=False, HAS_RUNNING=True, HAS_SAVE=False,
            COMPUTE=compute, BLOCK=BN_FINALIZE_BLOCK,
        )  # fmt: skip
        mean, invstd = stat[0], stat[1]
    x, (xsN, xsC, xsS) = _viewable(input)
    g, (gsN, gsC, gsS) = _viewable(grad_out)
    block_r, block_c = _bn_blocks(C, xsC, R)
    n_cblocks, split, rows_per_split = _bn_split(C, R, block_r, block_c)
    warps = warps_for(block_r * block_c)
    sums = torch.zeros((2, C), dtype=buf_dtype, device=dev)
    if R > 0 and (train or want_dw or want_db):
        part = torch.empty((2, split, C), dtype=buf_dtype, device=dev)
        _bn_bwd_reduce(
            (n_cblocks * split,),
            (g, x, mean, part, C, S, R, xsN, xsC, xsS, gsN, gsC, gsS,
             rows_per_split, n_cblocks, split),
            COMPUTE=compute, BLOCK_R=block_r, BLOCK_C=block_c, num_warps=warps,
        )  # fmt: skip
        _bn_bwd_finalize(
            (cdiv(C, BN_FINALIZE_BLOCK),),
            (part, invstd, sums, dw if dw is not None else sums, db if db is not None else sums,
             C, split),
            DW=want_dw, DB=want_db, COMPUTE=compute, BLOCK=BN_FINALIZE_BLOCK,
        )  # fmt: skip
    else:
        if dw is not None:
            dw = torch.zeros((C,), dtype=pdt, device=dev)
        if db is not None:
            db = torch.zeros((C,), dtype=pdt, device=dev)
    if dx is not None and R > 0:
        d_st = _ncs(dx)
        d_dst = dx if d_st is not None else torch.empty(input.shape, dtype=input.dtype, device=dev)
        osN, osC, osS = d_st if d_st is not None else _ncs(d_dst)  # type: ignore[misc]
        _bn_bwd_apply(
            (n_cblocks * cdiv(R, block_r),),
            (g, x, mean, invstd, w if w is not None else sums, sums, d_dst, C, S, R,
             xsN, xsC, xsS, gsN, gsC, gsS, osN, osC, osS, n_cblocks),
            TRAINING=bool(train), HAS_W=w is not None, COMPUTE=compute,
            BLOCK_R=block_r, BLOCK_C=block_c, num_warps=warps,
        )  # fmt: skip
        if d_dst is not dx:
            dx.copy_(d_dst)
    return dx, dw, db
