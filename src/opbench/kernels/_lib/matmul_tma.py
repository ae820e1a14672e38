"""A Hopper matmul for 16-bit operands: TMA tensor descriptors and a persistent grid.

``C = alpha * (A @ B) + beta * bias`` for one ``[M, K] @ [K, N]`` product (batch 1) of
float16 or bfloat16 operands, beside :mod:`matmul`'s pointer-based kernel. Its reason to
exist is the short (10-40 us) products of the traces, where cuBLAS led the pointer kernel
by 1.2-1.5x on the H100 whatever its tile (``benchmarks/results/matmul-tuning-h100.md``):

* operands arrive as host-side tensor descriptors (``triton.tools.tensor_descriptor``),
  so each K block is one TMA copy into swizzled shared memory, read by ``wgmma`` from
  there, with no address arithmetic or masks in the loop (out-of-bounds boxes read
  zeros, so ragged edges and the last split's overhang need no masking);
* an operand stored transposed (``A`` as ``[K, M]``, ``B`` as ``[N, K]``: ``x.t()``, a
  ``Linear`` weight) is described where it lies and its loaded tile transposed in the
  kernel (``A_T``, ``B_T``), which ``wgmma`` reads as a transposed shared-memory operand;
* ``NUM_PROGRAMS`` (at most one per SM) programs walk the work items in grouped order
  (``GROUP_M`` tile rows share a panel of ``B`` in L2); the tile loop and the K loop are
  flattened (``tl.range(..., flatten=True)``) so the pipeliner issues the next tile's
  loads during this tile's epilogue;
* optional split-K (a 7th configuration entry): fp32 partials into a workspace ``[splits,
  M, N]`` (stored through a 3-D descriptor where N is a multiple of 4) that
  :func:`matmul_shared.sum_split_partials` adds in a fixed order with the epilogue.

The output goes out through a descriptor too where it is row-contiguous and aligned
(``C_TMA``), else through masked pointer stores. A bias is read through pointers (a row
or column vector: :func:`matmul_shared.bias_mode`; a full bias matrix is declined).

:func:`tma_matmul_into` returns False where TMA does not apply and the caller must use
:func:`matmul.matmul_into`: a batch of more than one, float32 or mixed dtypes, a base
address or a row stride that is not a multiple of 16 bytes, neither dim contiguous, a
bias that is not a row or column vector.

Host path: a plan per call signature (dtype, sizes, strides, alignment, bias layout,
configuration) holds everything but the addresses; a call builds its descriptors (on
Triton 3.6, a slotted stand-in for ``TensorDescriptor``: the launcher reads only
``base.data_ptr()``, ``shape``, ``strides`` and ``padding`` from it, where the dataclass
validates every field on every construction) and launches the compiled kernel directly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from opbench.kernels._lib import tma_launch
from opbench.kernels._lib.launch import INTERPRETING as _INTERPRETING
from opbench.kernels._lib.launch import cdiv, jit_unspecialized, remember
from opbench.kernels._lib.matmul_lanes import product_lane
from opbench.kernels._lib.matmul_shared import bias_mode, dot_acc, sm_count, sum_split_partials
from opbench.kernels._lib.tma_launch import Desc

__all__ = ["DEFAULT_CONFIG", "tma_matmul_into", "tma_layout"]


#: (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages[, splits]) when the caller
#: names none: one warpgroup's 128x128 accumulator, four stages of 32 KiB.
DEFAULT_CONFIG: tuple[int, ...] = (128, 128, 64, 8, 4, 4)
_INTERP_CONFIG: tuple[int, ...] = (32, 32, 32, 4, 4, 1)


@jit_unspecialized
def _tma_mm_kernel(
    a_desc, b_desc, c_desc, c_ptr, x_ptr,
    M: tl.int32, N: tl.int32, k_per: tl.int32, programs: tl.int32,
    s_cs: tl.int64, s_cm: tl.int64, s_cn: tl.int64, s_xm: tl.int64, s_xn: tl.int64,
    alpha: tl.float64, beta: tl.float64,
    A_T: tl.constexpr, B_T: tl.constexpr, C_TMA: tl.constexpr, SPLITS: tl.constexpr,
    HAS_BIAS: tl.constexpr, BIAS_MODE: tl.constexpr, SCALED: tl.constexpr,
    TO_F32: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):  # fmt: skip
    tiles_m = (M + BLOCK_M - 1) // BLOCK_M
    tiles_n = (N + BLOCK_N - 1) // BLOCK_N
    per_group = GROUP_M * tiles_n
    work = tiles_m * tiles_n * SPLITS
    acc = tl.full([BLOCK_M, BLOCK_N], 0, tl.float32)
    comp = acc  # dot_acc's compensation, unused for 16-bit operands
    for w in tl.range(tl.program_id(0), work, programs, flatten=True):
        # a work item is (output tile, split); a split's programs are neighbours
        t = w // SPLITS
        split = w - t * SPLITS
        group = t // per_group
        first_m = group * GROUP_M
        group_m = tl.minimum(tiles_m - first_m, GROUP_M)
        pid_m = first_m + (t % per_group) % group_m
        pid_n = (t % per_group) // group_m
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        k_lo = split * k_per * BLOCK_K
        acc = tl.full([BLOCK_M, BLOCK_N], 0, tl.float32)
        for i in range(0, k_per):
            k = k_lo + i * BLOCK_K
            if A_T:
                a = a_desc.load([k, off_m]).T  # stored [K, M]: a [BLOCK_K, BLOCK_M] box
            else:
                a = a_desc.load([off_m, k])
            if B_T:
                b = b_desc.load([off_n, k]).T  # stored [N, K]
            else:
                b = b_desc.load([k, off_n])
            acc, comp = dot_acc(a, b, acc, comp, False, TO_F32)

        out = acc
        rm = off_m + tl.arange(0, BLOCK_M)
        rn = off_n + tl.arange(0, BLOCK_N)
        m_ok = rm < M
        n_ok = rn < N
        if SPLITS > 1 and C_TMA:
            # fp32 partial into the workspace [SPLITS, M, N] through its 3-D descriptor
            # (pointer stores of the fp32 tile spilled: 255 registers, 896 bytes on sm_90
            # at 128x128x64); the sum applies the epilogue
            c_desc.store([split, off_m, off_n], out.reshape([1, BLOCK_M, BLOCK_N]))
        elif SPLITS > 1:
            ws = c_ptr + split.to(tl.int64) * s_cs
            ptrs = ws + rm.to(tl.int64)[:, None] * s_cm + rn[None, :]
            tl.store(ptrs, out, mask=m_ok[:, None] & n_ok[None, :])
        else:
            if SCALED:
                out = out * tl.cast(alpha, tl.float32)
            if HAS_BIAS:
                if BIAS_MODE == 1:
                    x = tl.load(x_ptr + rn * s_xn, mask=n_ok, other=0.0).to(tl.float32)[None, :]
                else:
                    x = tl.load(x_ptr + rm * s_xm, mask=m_ok, other=0.0).to(tl.float32)[:, None]
                out = out + tl.cast(beta, tl.float32) * x
            if C_TMA:
                c_desc.store([off_m, off_n], out.to(c_desc.dtype))
            else:
                ptrs = c_ptr + rm.to(tl.int64)[:, None] * s_cm + rn[None, :] * s_cn
                tl.store(ptrs, out.to(c_ptr.dtype.element_ty), mask=m_ok[:, None] & n_ok[None, :])


# ----------------------------------------------------------------------------- host side


def tma_layout(t: torch.Tensor) -> int | None:
    """How a 2-D operand ``[R, C]`` can be described to TMA: 0, rows contiguous (the
    descriptor is ``[R, C]``); 1, columns contiguous (described as the stored ``[C, R]``,
    the kernel transposes its tiles); None, neither (a row stride not a multiple of 16
    bytes, no unit stride). The stride of a dim of size 1 is never used (it may be
    anything). The address is checked by the caller (it changes per call, the layout
    does not)."""
    R, C = t.shape
    sr, sc = t.stride()
    size = t.element_size()
    if (sc == 1 or C == 1) and (R == 1 or (sr * size % 16 == 0 and sr >= C)):
        return 0
    if (sr == 1 or R == 1) and (C == 1 or (sc * size % 16 == 0 and sc >= R)):
        return 1
    return None


def _desc_spec(t: torch.Tensor, transposed: int, rows: int, cols: int) -> tuple[list, list, list]:
    """(shape, strides, block) of the descriptor of a 2-D operand ``t`` ``[R, C]`` read in
    ``[rows, cols]`` tiles: as it lies when rows are contiguous, as ``[C, R]`` otherwise.
    An outer dim of size 1 gets a valid stride of its own (TMA checks it, never uses it)."""
    R, C = t.shape
    sr, sc = t.stride()
    shape, outer, block = ([C, R], sc, [cols, rows]) if transposed else ([R, C], sr, [rows, cols])
    if shape[0] == 1:
        outer = cdiv(shape[1], 16 // t.element_size()) * (16 // t.element_size())
    return shape, [outer, 1], block


_PLANS: dict[tuple, Any] = {}


def _plan(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None,
          alpha: float, beta: float, cfg: tuple[int, ...]) -> Any:  # fmt: skip
    """The launch plan of a call signature, or False where TMA does not apply."""
    if a.dtype not in (torch.float16, torch.bfloat16) or b.dtype != a.dtype:
        return False
    if out.dtype != a.dtype or a.shape[0] != 1 or not (a.is_cuda or _INTERPRETING):
        return False
    a2, b2, c2 = a[0], b[0], out[0]
    M, K = a2.shape
    N = b2.shape[1]
    la, lb = tma_layout(a2), tma_layout(b2.t())  # B as [N, K]: 0 is "stored [N, K]"
    if la is None or lb is None or M == 0 or N == 0 or K == 0:
        return False
    bm, bn, bk, group, warps, stages = cfg[:6]
    splits = cfg[6] if len(cfg) > 6 else 1
    tiles = cdiv(M, bm) * cdiv(N, bn)
    k_iters = cdiv(K, bk)
    k_per = cdiv(k_iters, max(1, splits))
    splits = cdiv(k_iters, k_per)
    a_spec = _desc_spec(a2, la, bm, bk)
    # B stored [N, K] (lb == 0, B_T): [bn, bk] boxes of that storage; else [bk, bn] of [K, N]
    b_spec = _desc_spec(b2.t(), 0, bn, bk) if lb == 0 else _desc_spec(b2, 0, bk, bn)
    if splits > 1:  # the fp32 workspace [splits, M, N], contiguous
        c_tma = N % 4 == 0
        c_spec = ([splits, M, N], [M * N, N, 1], [1, bm, bn]) if c_tma else None
    else:
        c_tma = tma_layout(c2) == 0 and c2.stride(1) == 1
        c_spec = _desc_spec(c2, 0, bm, bn) if c_tma else None
    has_bias = bias is not None and beta != 0
    x = bias.expand(out.shape)[0] if has_bias else c2
    if has_bias and bias_mode((0, *x.stride())) not in (1, 2):
        # a full bias matrix: [BLOCK_M, BLOCK_N] of 64-bit addresses spilled on sm_90 (255
        # registers, 156 bytes of spill stores at 128x128x64); the pointer kernel serves it
        return False
    programs = min(tiles * splits, sm_count(a.device))
    constexprs = dict(
        A_T=la == 1, B_T=lb == 0, C_TMA=c_tma, SPLITS=splits,
        HAS_BIAS=has_bias and splits == 1,
        BIAS_MODE=bias_mode((0, *x.stride())) if has_bias else 0,
        SCALED=alpha != 1 and splits == 1, TO_F32=_INTERPRETING,
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=group,
    )  # fmt: skip
    return {
        "specs": (a_spec, b_spec, c_spec), "programs": programs, "splits": splits,
        "ints": (M, N, k_per, programs), "constexprs": constexprs,
        "launch": dict(num_warps=warps, num_stages=stages), "has_bias": has_bias,
        "compiled": None,
    }  # fmt: skip


# Like matmul.matmul_into's signature, kept apart: the TMA path, which may decline (False)
def tma_matmul_into(
    out: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    bias: torch.Tensor | None = None,
    alpha: float = 1.0,
    beta: float = 1.0,
    config: tuple[int, ...] | None = None,
    lane_out: list | None = None,
) -> bool:
    """``out[0] = alpha * a[0] @ b[0] + beta * bias[0]`` with TMA descriptors, the operand
    convention of :func:`matmul.matmul_into` (3-D ``[1, M, K]``, ``[1, K, N]``, ``[1, M,
    N]``, any strides; ``bias`` broadcastable to ``out``, ignored when ``beta == 0``).
    Returns False, having done nothing, where TMA does not apply (see the module doc);
    True once launched. With ``lane_out``, a launch of a compiled plan appends its lane
    there (:func:`_lane`)."""
    cfg = config or (_INTERP_CONFIG if _INTERPRETING else DEFAULT_CONFIG)
    key = (a.dtype, b.dtype, out.dtype, a.shape, b.shape, out.shape, a.stride(), b.stride(),
           out.stride(), a.device,
           None if bias is None else (bias.dtype, bias.shape, bias.stride(), bias.data_ptr() & 15 == 0),
           beta != 0, alpha != 1, cfg)  # fmt: skip
    plan = _PLANS.get(key)
    if plan is None:
        plan = remember(_PLANS, key, _plan(out, a, b, bias, alpha, beta, cfg))
    if plan is False:
        return False
    pa, pb, pc = a.data_ptr(), b.data_ptr(), out.data_ptr()
    if (pa | pb | pc) & 15:
        return False
    a_spec, b_spec, c_spec = plan["specs"]
    splits = plan["splits"]
    if splits > 1:
        M, N = plan["ints"][:2]
        target = torch.empty((splits, M, N), dtype=torch.float32, device=a.device)
        s_cs, s_cm, s_cn = M * N, N, 1
    else:
        target = out[0]
        s_cs, s_cm, s_cn = 0, *target.stride()
    has_bias = plan["has_bias"]
    x = bias.expand(out.shape)[0] if has_bias else out[0]  # never read without a bias
    s_xm, s_xn = x.stride()
    compiled = plan["compiled"]
    if compiled is not None:
        descs = (Desc(a, *a_spec), Desc(b, *b_spec),
                 Desc(target if splits > 1 else out, *c_spec) if c_spec else target)  # fmt: skip
        args = (*descs, target, x, *plan["ints"], s_cs, s_cm, s_cn, s_xm, s_xn,
                float(alpha), float(beta), *compiled[1])  # fmt: skip
        tma_launch.launch(compiled[0], plan["programs"], a.device, args)
    else:
        descs = (TensorDescriptor(a, *a_spec), TensorDescriptor(b, *b_spec),
                 TensorDescriptor(target if splits > 1 else out, *c_spec) if c_spec
                 else target)  # fmt: skip
        k = _tma_mm_kernel[(plan["programs"],)](
            *descs, target, x, *plan["ints"], s_cs, s_cm, s_cn, s_xm, s_xn,
            float(alpha), float(beta), **plan["constexprs"], **plan["launch"],
        )  # fmt: skip
        plan["compiled"] = tma_launch.kept(_tma_mm_kernel, k, plan["constexprs"])
    summed: list = []
    if splits > 1:
        sum_split_partials(target.view(splits, -1), out[0], x if has_bias else None,
                           alpha, beta, summed)  # fmt: skip
    if lane_out is not None and compiled is not None:
        lane = plan.get("lane", False)
        if lane is False:
            lane = plan["lane"] = _lane(plan, args, summed, target, has_bias,
                                        x.data_ptr() & 15 == 0, a.device.index)  # fmt: skip
        if lane is not None:
            lane_out.append(lane)
    return True


def _lane(plan: dict[str, Any], args: tuple, summed: list, target: torch.Tensor,
          has_bias: bool, x_aligned: bool, index: int) -> Callable[..., bool] | None:  # fmt: skip
    """The lane of ``plan``'s launch on ``args``
    (:func:`~opbench.kernels._lib.matmul_lanes.product_lane`): with a split, into a fresh
    workspace shaped like ``target`` (C's descriptor and pointer read it), then the sum
    ``summed`` holds; None where the sum left nothing to repeat."""
    splits = plan["splits"]
    step = (plan["compiled"], (plan["programs"], 1, 1), args,
            (0, 1, 4, 4, 3) if splits > 1 else (0, 1, 2, 2, 3))  # fmt: skip
    return product_lane(step, summed, has_bias, (True, True, True, x_aligned), index,
                        tuple(target.shape) if splits > 1 else None)  # fmt: skip
