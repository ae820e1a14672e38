"""What both matmul kernels use (:mod:`matmul`'s pointer-based kernel and
:mod:`matmul_tma`'s TMA kernel), and the convolutions beside them: the fp32 accumulation
of one block's product (:func:`dot_acc`), how a bias is read (:func:`bias_mode`), the
SM count, and the split-K sum (:func:`sum_split_partials`). A leaf: it imports neither
kernel module, so they import it and not each other.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from opbench.kernels._lib.launch import Launcher, cdiv, jit_unspecialized
from opbench.kernels._lib.proven import common_power_of_two, multiple

__all__ = [
    "bias_mode", "dot_acc", "sm_count", "split_target", "sum_split_partials", "sum_split_target",
]  # fmt: skip

#: Only triton.language builtins inside the kernels (``tl.full``, not ``tl.zeros`` or
#: ``tl.cdiv``): where Triton was imported before ``TRITON_INTERPRET`` was set, the
#: language's own ``@jit`` helpers are compiled-mode objects the interpreter cannot call
#: (see ``norm.sum_f``).


@triton.jit
def dot_acc(a, w, acc, comp, IEEE: tl.constexpr, TO_F32: tl.constexpr):
    """``(acc, comp)`` after adding ``a @ w`` in fp32. Float32 operands (``IEEE``) are
    multiplied in full precision (``tl.dot`` would use TF32) and each block's products
    are added to ``acc`` with Kahan's compensation ``comp``: one FMA chain over K = 2,000
    was 2.3e-5 off on the H100 where cuBLAS was 1.6e-7, past the judge's float32 bound
    (adding the block's dot separately does not help: Triton folds ``dot(a, w) + acc``
    back into the chain). 16-bit operands accumulate on the tensor cores; ``comp`` is
    then unused. Under the interpreter tiles are converted to float32 first
    (``TO_F32``): it multiplies 16-bit arrays in their own precision otherwise. Shared by
    the matmul and convolution kernels."""
    if TO_F32:
        a = a.to(tl.float32)
        w = w.to(tl.float32)
    if IEEE:
        y = tl.dot(a, w, input_precision="ieee") - comp
        t = acc + y
        # no compensation once the sum is Inf (Inf - Inf would make it NaN: eager's
        # Inf must stay Inf); (t - t) == 0 holds exactly for finite t
        comp = tl.where((t - t) == 0, (t - acc) - y, 0.0)
        acc = t
    else:
        acc = tl.dot(a, w, acc)
    return acc, comp


@jit_unspecialized
def _split_k_sum_kernel(
    ws_ptr, c_ptr, bias_ptr,
    total: tl.int64, N: tl.int64, MN: tl.int64, splits: tl.int64,
    s_cb: tl.int64, s_cm: tl.int64, s_cn: tl.int64,
    s_xb: tl.int64, s_xm: tl.int64, s_xn: tl.int64,
    alpha: tl.float64, beta: tl.float64,
    HAS_BIAS: tl.constexpr, SCALED: tl.constexpr, BLOCK: tl.constexpr, V: tl.constexpr,
    DENSE: tl.constexpr,
):  # fmt: skip
    """Sums the split-K partials in a fixed order (deterministic, unlike atomics) and
    applies the epilogue: alpha, beta * bias, one rounding to the output dtype.

    ``V`` divides ``total`` (the host's proof, restated as arithmetic Triton reads: an
    unspecialized ``total`` left every partial's load and the store 2 or 4 bytes wide on
    sm_90); ``DENSE``: the output is contiguous in the partials' order, so it is written
    at ``idx``, without the divisions that place it."""
    total = multiple(total, V)
    idx = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = idx < total
    acc = tl.full([BLOCK], 0, tl.float32)
    for s in range(0, splits):
        acc += tl.load(ws_ptr + s * total + idx, mask=ok, other=0.0)
    b = idx // MN
    r = idx - b * MN
    m = r // N
    n = r - m * N
    if SCALED:
        acc = acc * tl.cast(alpha, tl.float32)
    if HAS_BIAS:
        x = tl.load(bias_ptr + b * s_xb + m * s_xm + n * s_xn, mask=ok, other=0.0)
        acc = acc + tl.cast(beta, tl.float32) * x.to(tl.float32)
    if DENSE:
        tl.store(c_ptr + idx, acc.to(c_ptr.dtype.element_ty), mask=ok)
    else:
        tl.store(c_ptr + b * s_cb + m * s_cm + n * s_cn, acc.to(c_ptr.dtype.element_ty),
                 mask=ok)  # fmt: skip


_split_k_sum = Launcher(_split_k_sum_kernel)


def bias_mode(strides: tuple[int, ...]) -> int:
    """How the kernel reads a bias expanded to ``[batch, M, N]`` with these strides: 1, a
    row vector (one value per column: ``addmm``'s ``[N]`` bias, stride 0 along M); 2, a
    column vector (one per row, stride 0 along N); 3, a full matrix with contiguous rows;
    0, any other strides."""
    _, sm, sn = strides
    if sm == 0:
        return 1
    if sn == 0:
        return 2
    return 3 if sn == 1 else 0


@functools.cache
def sm_count(device: torch.device) -> int:
    """Streaming multiprocessors of a CUDA device; under the interpreter a small number,
    so the CPU tests take the split-K path on skinny problems too."""
    if device.type != "cuda":
        return 4
    return torch.cuda.get_device_properties(device).multi_processor_count


#: The split-K sum loads and stores vectors where its grid is at least this share of the
#: SMs. On an H200 (2026-12-01, device time, the strided backward rows of
#: ``conv-heldout-strided-bwd-h200-2026-12-01-restated.md`` against ``-vector.md``)
#: vectors took the sums of 389K-element weight gradients from 33.8 to 25.3 us, and those
#: of RGB stems' (1.7K-9.4K elements, 1-10 programs, 128 splits each) from 12.5 to 20 us;
#: half the SMs is a line between the two, not a measured one (0: always, a large
#: number: never, as ``conv_heldout.py --variant`` settings).
SUM_VECTORS_SM_SHARE = 0.5


def sum_split_partials(
    partials: torch.Tensor, out: torch.Tensor, bias: torch.Tensor | None = None,
    alpha: float = 1.0, beta: float = 1.0, launched: list | None = None,
) -> None:  # fmt: skip
    """``out = alpha * partials.sum(0) + beta * bias`` for fp32 split-K partials
    ``[splits, out.numel()]`` in ``out``'s logical order (``out`` 1-, 2- or 3-D, any
    strides; ``bias`` expanded to it), summed in a fixed order: the same inputs give the
    same bits, which atomics would not. ``launched`` receives ``(compiled kernel and its
    constexpr tail, grid, arguments with that tail)`` of a compiled launch (what a matmul
    lane repeats), nothing under the interpreter."""
    o3 = out.view((1,) * (3 - out.dim()) + tuple(out.shape)) if out.dim() < 3 else out
    x3 = o3 if bias is None else bias.expand(o3.shape)
    B, M, N = o3.shape
    total = B * M * N
    grid = (cdiv(total, _SUM_BLOCK),)
    args = (partials, o3, x3, total, N, M * N, partials.shape[0], *o3.stride(), *x3.stride(),
            float(alpha), float(beta))  # fmt: skip
    wide = grid[0] >= sm_count(out.device) * SUM_VECTORS_SM_SHARE
    constexprs = dict(
        HAS_BIAS=bias is not None, SCALED=alpha != 1, BLOCK=_SUM_BLOCK,
        V=common_power_of_two(total) if wide else 1, DENSE=o3.is_contiguous(),
    )  # fmt: skip
    _split_k_sum(grid, args, **constexprs, num_warps=4)
    if launched is not None:
        compiled = _split_k_sum.compiled_for(args, {**constexprs, "num_warps": 4})
        if compiled is not None:
            launched.append((compiled, (*grid, 1, 1), (*args, *compiled[1])))


def split_target(out: torch.Tensor, splits: int) -> torch.Tensor:
    """Where a kernel split over ``splits`` programs a result writes: ``out`` itself for
    one split, else an fp32 workspace ``[splits, out.numel()]`` in ``out``'s memory order
    (``out`` dense: contiguous or channels-last), summed into it by
    :func:`sum_split_target`. The weight gradients and the channels-last convolution
    share this, so none of them writes partials with atomics (the same inputs give the
    same bits)."""
    if splits == 1:
        return out
    return torch.empty((splits, out.numel()), dtype=torch.float32, device=out.device)


def sum_split_target(target: torch.Tensor, out: torch.Tensor) -> None:
    """Sum a :func:`split_target` workspace into ``out`` in a fixed order; nothing when
    the kernel wrote ``out`` directly."""
    if target is not out:
        sum_split_partials(target, out.as_strided((out.numel(),), (1,)))


#: Elements per program of the split-K sum (a memory-bound pass over the partials).
_SUM_BLOCK = 1024
