"""A Hopper batched matmul for 16-bit operands: 3-D TMA descriptors and a persistent grid,
``C[b] = alpha * (A[b] @ B[b]) + beta * bias`` over a batch of more than one matrix.

Why beside :mod:`matmul_tma` (batch 1): the traces' ``bmm`` over K = 64 (``[48, 1024,
64] @ [48, 64, 1024]``, attention scores) is bound by writing its output, which the
pointer kernel does through masked stores at 0.66-0.71x eager on an H200 (device time,
2026-11-29, ``benchmarks/results/matmul-rule-h200-2026-11-29.md``). A descriptor per
operand over ``[batch, rows, cols]`` reads and writes boxes of ``[1, rows, cols]``, so
a box never crosses into the next matrix: rows past M and columns past K read zeros
from the matrix's own bounds, whatever the next one holds (NaN and Inf there stay
there), and the output goes out by TMA stores. Flattening the batch into the rows of a
2-D descriptor would not: a K block past K would multiply the next matrix's values.

A kernel of its own, not a mode of :mod:`matmul_tma`'s, so the batch-1 kernel the shape
rule serves and was timed on compiles as it did. Compiled and tested on an H200 and timed
on every traced batched product by the ``-wave`` sweep of 2026-11-29: the shape rule's
candidate ``tmab`` (:mod:`matmul_rule`), ranked first for 54 of its tuning points (the
held-out ``bmm`` products 0.920x -> 0.988x eager as served, with the rule's other changes).

:func:`tma_bmm_into` returns False where it does not apply (a batch of one, float32,
mixed dtypes, an operand neither of whose matrix dims is contiguous, a row or batch
stride not a multiple of 16 bytes, a broadcast batch (stride 0), a bias that is not one
row or column vector for the whole batch, an address not 16-byte aligned); the caller
then uses another kernel. No split-K: a batch fills the GPU with tiles.
"""

from __future__ import annotations

from typing import Any

import torch
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from opbench.kernels._lib import tma_launch
from opbench.kernels._lib.launch import INTERPRETING as _INTERPRETING
from opbench.kernels._lib.launch import cdiv, jit_unspecialized, remember
from opbench.kernels._lib.matmul_lanes import lane_of
from opbench.kernels._lib.matmul_shared import bias_mode, dot_acc, sm_count
from opbench.kernels._lib.matmul_tma import tma_layout
from opbench.kernels._lib.tma_launch import Desc

__all__ = ["tma_bmm_into"]


@jit_unspecialized
def _tma_bmm_kernel(
    a_desc, b_desc, c_desc, c_ptr, x_ptr,
    M: tl.int32, N: tl.int32, k_iters: tl.int32, batch: tl.int32, programs: tl.int32,
    s_cb: tl.int64, s_cm: tl.int64, s_cn: tl.int64, s_xm: tl.int64, s_xn: tl.int64,
    alpha: tl.float64, beta: tl.float64,
    A_T: tl.constexpr, B_T: tl.constexpr, C_TMA: tl.constexpr,
    HAS_BIAS: tl.constexpr, BIAS_MODE: tl.constexpr, SCALED: tl.constexpr,
    TO_F32: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):  # fmt: skip
    tiles_m = (M + BLOCK_M - 1) // BLOCK_M
    tiles_n = (N + BLOCK_N - 1) // BLOCK_N
    per_matrix = tiles_m * tiles_n
    per_group = GROUP_M * tiles_n
    acc = tl.full([BLOCK_M, BLOCK_N], 0, tl.float32)
    comp = acc  # dot_acc's compensation, unused for 16-bit operands
    for w in tl.range(tl.program_id(0), batch * per_matrix, programs, flatten=True):
        # a work item is (matrix, output tile); a matrix's tiles in grouped order
        bi = w // per_matrix
        t = w - bi * per_matrix
        group = t // per_group
        first_m = group * GROUP_M
        group_m = tl.minimum(tiles_m - first_m, GROUP_M)
        pid_m = first_m + (t % per_group) % group_m
        pid_n = (t % per_group) // group_m
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        acc = tl.full([BLOCK_M, BLOCK_N], 0, tl.float32)
        for i in range(0, k_iters):
            k = i * BLOCK_K
            if A_T:  # stored [batch, K, M]
                a = a_desc.load([bi, k, off_m]).reshape([BLOCK_K, BLOCK_M]).T
            else:
                a = a_desc.load([bi, off_m, k]).reshape([BLOCK_M, BLOCK_K])
            if B_T:  # stored [batch, N, K]
                b = b_desc.load([bi, off_n, k]).reshape([BLOCK_N, BLOCK_K]).T
            else:
                b = b_desc.load([bi, k, off_n]).reshape([BLOCK_K, BLOCK_N])
            acc, comp = dot_acc(a, b, acc, comp, False, TO_F32)

        out = acc
        rm = off_m + tl.arange(0, BLOCK_M)
        rn = off_n + tl.arange(0, BLOCK_N)
        m_ok = rm < M
        n_ok = rn < N
        if SCALED:
            out = out * tl.cast(alpha, tl.float32)
        if HAS_BIAS:
            if BIAS_MODE == 1:
                x = tl.load(x_ptr + rn * s_xn, mask=n_ok, other=0.0).to(tl.float32)[None, :]
            else:
                x = tl.load(x_ptr + rm * s_xm, mask=m_ok, other=0.0).to(tl.float32)[:, None]
            out = out + tl.cast(beta, tl.float32) * x
        if C_TMA:
            c_desc.store([bi, off_m, off_n], out.to(c_desc.dtype).reshape([1, BLOCK_M, BLOCK_N]))
        else:
            ptrs = (c_ptr + bi.to(tl.int64) * s_cb + rm.to(tl.int64)[:, None] * s_cm
                    + rn[None, :] * s_cn)  # fmt: skip
            tl.store(ptrs, out.to(c_ptr.dtype.element_ty), mask=m_ok[:, None] & n_ok[None, :])


def _spec3(t: torch.Tensor, layout: int, rows: int, cols: int) -> tuple[list, list, list] | None:
    """(shape, strides, block) of the 3-D descriptor of ``t`` ``[batch, R, C]`` read in
    ``[rows, cols]`` tiles of one matrix: as it lies where rows are contiguous (``layout``
    0), as ``[batch, C, R]`` otherwise; None where the batch stride cannot be described
    (0, negative, or not a multiple of 16 bytes: TMA's global strides must be)."""
    B, R, C = t.shape
    sb, sr, sc = t.stride()
    size = t.element_size()
    if sb <= 0 or sb * size % 16:
        return None
    if layout == 0:
        outer = sr if R > 1 else cdiv(C, 16 // size) * (16 // size)
        return [B, R, C], [sb, outer, 1], [1, rows, cols]
    outer = sc if C > 1 else cdiv(R, 16 // size) * (16 // size)
    return [B, C, R], [sb, outer, 1], [1, cols, rows]


_PLANS: dict[tuple, Any] = {}


def _plan(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None,
          alpha: float, beta: float, cfg: tuple[int, ...]) -> Any:  # fmt: skip
    """The launch plan of a call signature, or False where this kernel does not apply."""
    if a.dtype not in (torch.float16, torch.bfloat16) or b.dtype != a.dtype:
        return False
    if out.dtype != a.dtype or a.shape[0] < 2 or not (a.is_cuda or _INTERPRETING):
        return False
    B, M, K = a.shape
    N = b.shape[2]
    if 0 in (M, N, K):
        return False
    la, lb = tma_layout(a[0]), tma_layout(b[0].t())  # B as [N, K]: 0 is "stored [N, K]"
    if la is None or lb is None:
        return False
    bm, bn, bk, group, warps, stages = cfg[:6]
    a_spec = _spec3(a, la, bm, bk)
    # B stored [N, K] (lb == 0, B_T): [bn, bk] boxes of that storage; else [bk, bn] of [K, N]
    b_spec = _spec3(b.transpose(1, 2), 0, bn, bk) if lb == 0 else _spec3(b, 0, bk, bn)
    c_spec = _spec3(out, 0, bm, bn) if tma_layout(out[0]) == 0 and out.stride(2) == 1 else None
    if a_spec is None or b_spec is None:
        return False
    has_bias = bias is not None and beta != 0
    x = bias.expand(out.shape) if has_bias else out
    mode = bias_mode(x.stride()) if has_bias else 0
    if has_bias and (x.stride(0) != 0 or mode not in (1, 2)):
        return False  # one row or column vector for every matrix, or the other kernels
    programs = min(B * cdiv(M, bm) * cdiv(N, bn), sm_count(a.device))
    constexprs = dict(
        A_T=la == 1, B_T=lb == 0, C_TMA=c_spec is not None, HAS_BIAS=has_bias,
        BIAS_MODE=mode, SCALED=alpha != 1, TO_F32=_INTERPRETING,
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=group,
    )  # fmt: skip
    return {"specs": (a_spec, b_spec, c_spec), "ints": (M, N, cdiv(K, bk), B, programs),
            "constexprs": constexprs, "launch": dict(num_warps=warps, num_stages=stages),
            "has_bias": has_bias}  # fmt: skip


# Like matmul_tma.tma_matmul_into's signature, kept apart: the batched kernel, which may decline
def tma_bmm_into(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor,
                 bias: torch.Tensor | None, alpha: float, beta: float,
                 config: tuple[int, ...], lane_out: list | None = None) -> bool:  # fmt: skip
    """``out[i] = alpha * a[i] @ b[i] + beta * bias[i]`` over 3-D ``[batch, M, K]``,
    ``[batch, K, N]`` and ``[batch, M, N]`` (any strides; ``bias`` broadcastable to
    ``out``, ignored when ``beta == 0``) with 3-D TMA descriptors. Returns False, having
    done nothing, where this kernel does not apply (the module doc); True once launched.
    The first launch of a plan goes through ``kernel[grid]``; later ones launch the compiled
    kernel directly (:func:`~opbench.kernels._lib.tma_launch.launch`); with ``lane_out``,
    such a launch appends its lane there (:func:`~opbench.kernels._lib.matmul_lanes.lane_of`)."""
    key = (a.dtype, b.dtype, out.dtype, a.shape, b.shape, out.shape, a.stride(), b.stride(),
           out.stride(), a.device,
           None if bias is None else (bias.dtype, bias.shape, bias.stride(), bias.data_ptr() & 15 == 0),
           beta != 0, alpha != 1, config)  # fmt: skip
    plan = _PLANS.get(key)
    if plan is None:
        plan = remember(_PLANS, key, _plan(out, a, b, bias, alpha, beta, config))
    if plan is False or (a.data_ptr() | b.data_ptr() | out.data_ptr()) & 15:
        return False
    a_spec, b_spec, c_spec = plan["specs"]
    x = bias.expand(out.shape)[0] if plan["has_bias"] else out[0]  # never read without a bias
    M, N, k_iters, B, programs = plan["ints"]
    rest = (out, x, M, N, k_iters, B, programs, *out.stride(), *x.stride(), float(alpha),
            float(beta))  # fmt: skip
    compiled = plan.get("compiled")
    if compiled is not None:  # a descriptor reads only its base's address: the plan has the rest
        descs = (Desc(a, *a_spec), Desc(b, *b_spec), Desc(out, *c_spec) if c_spec else out)
        args = (*descs, *rest, *compiled[1])
        tma_launch.launch(compiled[0], programs, a.device, args)
        if lane_out is not None:
            lane = plan.get("lane", False)
            if lane is False:
                lane = plan["lane"] = lane_of(
                    [(compiled, (programs, 1, 1), args, (0, 1, 2, 2, 3))], plan["has_bias"],
                    (True, True, True, x.data_ptr() & 15 == 0), a.device.index,
                )  # fmt: skip
            lane_out.append(lane)
        return True
    descs = (TensorDescriptor(a, *a_spec), TensorDescriptor(b, *b_spec),
             TensorDescriptor(out, *c_spec) if c_spec else out)  # fmt: skip
    k = _tma_bmm_kernel[(programs,)](*descs, *rest, **plan["constexprs"], **plan["launch"])
    plan["compiled"] = tma_launch.kept(_tma_bmm_kernel, k, plan["constexprs"])
    return True
