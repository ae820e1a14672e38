"""The matmul family (``mm``, ``bmm``, ``addmm``, ``baddbmm``): one tiled Triton kernel's
launch plans, the configurations per shape bucket, and the ATen entry points. The kernel
itself (``@triton.jit`` device code) is :mod:`~opbench.kernels._lib.matmul_kernels`; its
launcher and operand layouts, shared with the batch-summing product,
:mod:`~opbench.kernels._lib.matmul_pointer`.

One kernel serves all four: ``C[b] = alpha * (A[b] @ B[b]) + beta * bias[b]``, batch
``b`` folded into grid axis 0 (axis 1 would cap a ``bmm`` at 65,535 matrices), each
operand addressed through its own strides, so transposed and sliced operands
(``x.t()``, ``x[:, ::2]``, a stride-0 expanded bias) are read where they lie, never
copied. Tiles are visited in groups of ``GROUP_M`` rows of tiles so neighbouring programs
share the same panel of ``B`` in L2.

Numerics: float16 and bfloat16 operands go to ``tl.dot`` as they are, accumulating in
float32 (tensor cores), and the result is rounded once to the output dtype after the
``alpha``/``beta`` epilogue. float32 is multiplied in full precision
(``input_precision="ieee"``), as eager does with ``torch.backends.cuda.matmul.allow_tf32``
off (its default); TF32 would fail a float64-relative check on long reductions. Under
Triton's interpreter every tile is converted to float32 before the dot (it multiplies
16-bit arrays in their own precision otherwise). float64 and integer operands are declined
(``NotImplementedError``: ``tl.dot`` has no float64 or integer path we trust on both
Triton 3.6 and 3.9), so PyTorch serves them.

Speed on the H100 comes from what Triton can prove about the addresses, not from the
tile shapes alone: the first version passed every size and stride as a plain runtime
integer, so no load could be vectorized, and ran at 0.05-0.3x cuBLAS on the traced
shapes. Now each operand's layout (rows or columns contiguous, or general) is a
compile-time choice, and sizes and strides that are multiples of 16 bytes arrive
divided by the vector width and are multiplied back inside the kernel (``DM``, ``DA``,
...), which lets the compiler see the alignment and issue 16-byte loads while one
compiled kernel still serves every value. Few output tiles over a long K (weight
gradients: ``16 x 16 x 663552``) split K across programs (:func:`split_k`), whose fp32
partials a second kernel sums in a fixed order (deterministic) before the epilogue.
Measured: ``benchmarks/results/matmul-tuning-h100.md``.

A second mode of the same kernel (``BATCH_K``, :func:`matmul_batch_sum_into`) sums the
batch's products into one matrix, ``C = sum_b A[b] @ B[b]``, its K loop running over the
batch entries too: a pointwise convolution's weight gradient over NCHW images, which
cannot be viewed as one long product. Off, the kernel's sm_90 code is unchanged.

``beta == 0`` ignores the bias altogether (NaN and Inf in it do not propagate, as
documented for ``addmm``); ``K == 0`` gives ``beta * bias`` (zeros for ``mm``).

Which kernel and tile a 16-bit product of the entry points runs on is the shape rule's
(:mod:`~opbench.kernels._lib.matmul_rule`, :func:`matmul_ruled_into`): the candidate with
the least regret over the nearest products of the traces' tuning half, which replaced
the tables of exact products for them (the held-out half's products of a GFLOP or more,
H200 device time: 0.716x -> 0.934x eager). A repeat call of an entry point's signature that
one launch served runs its lane (:mod:`~opbench.kernels._lib.matmul_lanes`): the output
allocated and the compiled kernels launched, nothing else (``mm`` 1024^3 on an H200: 53.3
us of host time a call without it, 25.2 with it, eager 22.6 on that machine;
``benchmarks/results/matmul-lanes-h200-2026-11-29.md``).
Otherwise (float32; the convolutions' products, which call :func:`matmul_into`)
configurations (``BLOCK_M``, ``BLOCK_N``, ``BLOCK_K``, ``GROUP_M``, warps, stages) come
from exact products and then buckets of (element size, M, N, K), tables tuned ahead of
time on the GPU by ``benchmarks/tune/tune_matmul.py`` into ``matmul_configs.py`` beside this
file; nothing is tuned inside a call.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
import triton.language as tl

from opbench.kernels._lib.launch import INTERPRETING as _INTERPRETING
from opbench.kernels._lib.launch import cdiv, remember
from opbench.kernels._lib.matmul_configs import SHAPES, TUNED
from opbench.kernels._lib.matmul_lanes import keep, lane_key, laned, product_lane
from opbench.kernels._lib.matmul_pointer import (
    INTERP_CONFIG,
    layout_of,
    mm_launcher,
    operand_layouts,
    pow2_multiple,
)
from opbench.kernels._lib.matmul_rule import (
    in_domain,
    in_small_domain,
    layout_class,
    ranked,
    ranked_small,
)
from opbench.kernels._lib.matmul_shared import bias_mode, dot_acc, sm_count, sum_split_partials
from opbench.kernels._lib.matmul_tma_configs import TMA_SHAPES
from opbench.kernels._lib.native_launch import declare_replay

__all__ = [
    "addmm", "baddbmm", "bmm", "matmul_into", "matmul_ruled_into", "mm",
    "CONFIGS",
    "SHAPE_CONFIGS", "TMA_SHAPE_CONFIGS", "bias_mode", "bucket", "config_for", "dot_acc",
    "sm_count", "split_k", "split_plan", "sum_split_partials",
]  # fmt: skip


_TL = {torch.float16: tl.float16, torch.bfloat16: tl.bfloat16, torch.float32: tl.float32}


# ----------------------------------------------------------------------------- configurations

#: (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages), optionally followed by
#: the number of programs along K (split-K; without it :func:`split_plan` decides)
Config = tuple[int, ...]

#: Size classes of a dimension: up to 32, 128, 512, 1024, 4096, more. A 1024-row product
#: must not share a class (and so a tuned tile) with 256-row ones: with edges at 32, 128
#: and 1024 the H100 ran 1024x1024x1024 on a 16x64 tile tuned for 256 rows, at 0.37x
#: cuBLAS. Finer classes (every power of two) made 401 buckets of the 1,729 traced shapes,
#: more than ten GPU-minutes of tuning can cover.
_EDGES = (32, 128, 512, 1024, 4096)


def _cls(n: int) -> int:
    return next((i for i, e in enumerate(_EDGES) if n <= e), len(_EDGES))


@functools.lru_cache(maxsize=4096)
def bucket(itemsize: int, M: int, N: int, K: int) -> str:
    """The tuning bucket of a problem: element size and the size class of M, N and K
    (``"2:4:4:3"``: 16-bit, M and N in 1025-4096, K in 513-1024). Kept per problem (a pure
    function of its sizes): formatting it was a sixth of a pointwise convolution's backward
    Python (``benchmarks/probes/conv_host_path.py``)."""
    return f"{itemsize}:{_cls(M)}:{_cls(N)}:{_cls(K)}"


def _default(itemsize: int, M: int, N: int) -> Config:
    """Untuned defaults, the usual H100 Triton shapes: 128x128x64 tiles for 16-bit
    operands on large outputs, narrower tiles for skinny ones, 64x64x32 for IEEE float32
    (CUDA-core FMAs: wide tiles spill registers)."""
    if itemsize == 4:
        return (64, 64, 32, 8, 4, 3)
    if M <= 32:
        return (16 if M <= 16 else 32, 128, 64, 8, 4, 4)
    if N <= 32:
        return (128, 32, 64, 8, 4, 4)
    if M <= 128 or N <= 128:
        return (64, 128, 64, 8, 4, 4)
    return (128, 128, 64, 8, 8, 3)


#: Tuned configurations per bucket (``matmul_configs.py``, written by
#: ``benchmarks/tune/tune_matmul.py``); buckets not in it use :func:`_default`. A Python module,
#: not a data file: the static scan rightly flags kernels that read files.
CONFIGS: dict[str, Config] = dict(TUNED)


#: Configurations of exact products, ``(itemsize, batch, M, N, K)``, checked before the
#: buckets (``matmul_configs.SHAPES``, timed on the traced shapes themselves by
#: ``tune_matmul.py --shapes``): a bucket spans a 4x range of each size, and one config
#: cannot suit all of it (bucket 2:4:3:3, tuned on 2048x768x768, ran 2048x1024x1024 on
#: 64x64 tiles at 0.59x cuBLAS).
SHAPE_CONFIGS: dict[tuple[int, int, int, int, int], Config] = dict(SHAPES)

#: Exact products the TMA kernel (:mod:`~opbench.kernels._lib.matmul_tma`: tensor-memory
#: loads, a persistent grid) runs when given no configuration
#: (``matmul_tma_configs.TMA_SHAPES``, where it beat this module's kernel on the H100: 0.741
#: -> 0.860x eager over the 9 traced products that lost most); a product it declines
#: (batched, unaligned, f32) falls back here.
TMA_SHAPE_CONFIGS: dict[tuple[int, int, int, int, int], Config] = dict(TMA_SHAPES)


def config_for(itemsize: int, M: int, N: int, K: int, batch: int = 1) -> Config:
    if _INTERPRETING:
        return INTERP_CONFIG
    return (SHAPE_CONFIGS.get((itemsize, batch, M, N, K)) or CONFIGS.get(bucket(itemsize, M, N, K))
            or _default(itemsize, M, N))  # fmt: skip


# ----------------------------------------------------------------------------- launching


#: Whether :func:`split_k` keeps the split grid within ``2 x SMs`` programs (rounding the
#: split down) rather than reaching past it (rounding up). Why: a program of a 128 x 128
#: fp32 tile at 8 warps holds an SM alone, so past the second wave a few programs run a
#: third one: the channels-last weight gradient of the held-out ``[64, 256, 14, 14]`` 3x3
#: row has 36 tiles, split 8 ways into 288 programs (132 + 132 + 24) where 7 ways make
#: 252 (132 + 120); Nsight Compute read that kernel latency-bound (H200, 2026-12-01). On
#: since the device-time A/B on the 20 most used backward rows of each half (H200,
#: 2026-12-02, ``split-whole-waves-h200-2026-12-02.md``): the tuning half's 2 rows it
#: changes 1.059x, the 18 it leaves 1.004x (the noise floor); held out, judged after,
#: 1 row 1.111x, and 4 strided rows 1.073x (``nhwc-wgrad-strided-variants-h200-2026-12-02``).
SPLIT_WHOLE_WAVES = True
#: Whether 16-bit products under the shape rule's domain (at least
#: :data:`~opbench.kernels._lib.matmul_rule.MIN_FLOP_SMALL`) take the small-product rule's
#: tile (:func:`~opbench.kernels._lib.matmul_rule.ranked_small`: the tables or one of
#: ``SMALL_TILES``, by the 12 nearest tuning-half products) rather than the tables'. On:
#: by leave-one-out over the tuning half's 232 such products 1.062x eager against the
#: tables' 0.934x; held out (never fitted on) 1.034x against 0.916x over 92 (``bmm``
#: 1.137x against 0.910x; ``matmul-small-rule-h200-2026-12-02.md``, H200, device time).
SMALL_RULE = True


def split_k(tiles: int, k_iters: int, sms: int) -> int:
    """Programs along K for a problem of ``tiles`` output tiles and ``k_iters`` K blocks:
    where the tiles fill less than half the GPU and K is long (a weight gradient with a
    huge reduction, ``16 x 16 x 663552`` in the traces), K is cut so the GPU fills, each
    piece keeping at least 8 K blocks; 1 (no split) otherwise."""
    if tiles * 2 > sms or k_iters < 16:
        return 1
    fill = (2 * sms) // tiles if SPLIT_WHOLE_WAVES else cdiv(2 * sms, tiles)
    return max(1, min(k_iters // 8, fill, 128))


def split_plan(
    tiles: int, iters: int, device: torch.device, splits: int | None = None
) -> tuple[int, int]:
    """(programs along the reduction, blocks each) for ``tiles`` output tiles over
    ``iters`` reduction blocks on ``device``: ``splits`` where a configuration names it,
    else :func:`split_k`'s count, evened out so the last program has blocks too (1
    program of 0 blocks for an empty reduction)."""
    want = split_k(tiles, iters, sm_count(device)) if splits is None else max(1, splits)
    per = cdiv(iters, want)
    return (cdiv(iters, per) if per else 1), per


#: :func:`matmul_into`'s launch plans by call signature (:func:`_mm_plan`).
_MM_PLANS: dict[tuple, tuple] = {}
#: The lanes of those launches (None where the kernel launches through ``kernel[grid]``).
_MM_LANES: dict[tuple, Any] = {}


def _mm_plan(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor, x: torch.Tensor, cfg: Config,
             has_bias: bool, scaled: bool) -> tuple:  # fmt: skip
    """``(grid, splits, the integer arguments, the constexprs)`` of one call signature of
    :func:`matmul_into`: everything that follows from sizes, strides, the 16-byte
    alignment of the three addresses, the configuration, the SM count and the bias's
    presence, computed once per signature (the pointer kernel's host path read 18 us a
    call on the CPU machine with its launch stubbed, most of it this). A split's fp32
    workspace is a fresh allocation each call, always 16-byte aligned: its layout is read
    from one made here."""
    B, M, K = a.shape
    N = b.shape[2]
    bm, bn, bk, group, warps, stages = cfg[:6]
    vec = 16 // a.element_size()
    dm, dn, dk = (pow2_multiple(n, vec) for n in (M, N, K))
    la, da, sa, lb, db, sb = operand_layouts(a, b, vec)
    tiles = B * cdiv(M, bm) * cdiv(N, bn)
    k_iters = cdiv(K, bk)
    splits, k_per_q = split_plan(tiles, k_iters, a.device, cfg[6] if len(cfg) > 6 else None)
    if splits > 1:
        target = torch.empty((splits, B, M, N), dtype=torch.float32, device=a.device)
        lc, dc, sc = layout_of(target[0], vec)
        s_cs = B * M * N // dc
    else:
        s_cs = 0
        lc, dc, sc = layout_of(out, vec)
    epilogue = splits == 1
    ints = (M // dm, N // dn, K // dk, k_per_q, *sa, *sb, s_cs, *sc, *x.stride())
    constexprs = dict(
        HAS_BIAS=has_bias and epilogue, BIAS_MODE=bias_mode(x.stride()) if has_bias else 0,
        SCALED=scaled and epilogue,
        IEEE=a.dtype == torch.float32, TO_F32=_INTERPRETING, DM=dm, DN=dn, DK=dk,
        A_LAYOUT=la, DA=da, B_LAYOUT=lb, DB=db, C_LAYOUT=lc, DC=dc,
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=group, BATCH_K=False,
        num_warps=warps, num_stages=stages,
    )  # fmt: skip
    return (tiles, splits), splits, ints, constexprs


# Like matmul_tma.tma_matmul_into's signature, kept apart: the path that always serves
def matmul_into(
    out: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    bias: torch.Tensor | None = None,
    alpha: float = 1.0,
    beta: float = 1.0,
    config: Config | None = None,
    lane_out: list | None = None,
) -> torch.Tensor:
    """``out[i] = alpha * a[i] @ b[i] + beta * bias[i]`` for 3-D ``[batch, M, K]`` and
    ``[batch, K, N]`` operands of one float dtype, into a 3-D ``out`` (any strides, not
    overlapping its inputs); ``bias`` broadcastable to ``out`` (expanded, not copied), or
    None. ``config`` overrides the bucket's (the tuning script). With ``lane_out``, a
    compiled launch appends its lane there, a split one with its sum (:func:`_mm_lane`)."""
    B, M, K = a.shape
    N = b.shape[2]
    if out.numel() == 0:
        return out
    if config is None and not _INTERPRETING:
        tma = TMA_SHAPE_CONFIGS.get((a.element_size(), B, M, N, K))
        if tma is not None:
            from opbench.kernels._lib.matmul_tma import tma_matmul_into  # the GPU's TMA path

            if tma_matmul_into(out, a, b, bias, alpha, beta, tma, lane_out):
                return out
    cfg = config or config_for(a.element_size(), M, N, K, B)
    has_bias = bias is not None and beta != 0
    x = bias.expand(B, M, N) if has_bias else out  # never read without a bias
    key = (cfg, a.dtype, a.device, a.shape, a.stride(), b.shape, b.stride(), out.shape,
           out.stride(), x.stride(), has_bias, alpha != 1, a.data_ptr() & 15 == 0,
           b.data_ptr() & 15 == 0, out.data_ptr() & 15 == 0, sm_count(a.device),
           _INTERPRETING, SPLIT_WHOLE_WAVES)  # fmt: skip
    plan = _MM_PLANS.get(key)
    if plan is None:
        plan = remember(_MM_PLANS, key, _mm_plan(out, a, b, x, cfg, has_bias, alpha != 1))
    grid, splits, ints, constexprs = plan
    if splits > 1:
        target = torch.empty((splits, B, M, N), dtype=torch.float32, device=a.device)
    else:
        target = out
    args = (a, b, target, x, *ints, float(alpha), float(beta))
    mm_launcher(grid, args, **constexprs)
    summed: list = []
    if splits > 1:
        sum_split_partials(target.view(splits, -1), out, x if has_bias else None, alpha, beta,
                           summed)  # fmt: skip
    if lane_out is not None:
        lane = _MM_LANES.get(key, False)
        if lane is False:
            lane = remember(_MM_LANES, key, _mm_lane(grid, args, constexprs, summed, target,
                                                     (a, b, out, x), has_bias))  # fmt: skip
        if lane is not None:
            lane_out.append(lane)
    return out


def _mm_lane(grid: tuple[int, int], args: tuple, constexprs: dict[str, Any], summed: list,
             target: torch.Tensor, tensors: tuple[torch.Tensor, ...],
             has_bias: bool) -> Any:  # fmt: skip
    """The lane of :func:`matmul_into`'s launch on ``args``
    (:func:`~opbench.kernels._lib.matmul_lanes.product_lane`): with a split, into a fresh
    workspace shaped like ``target``, then the sum ``summed`` holds. None under the
    interpreter (nothing compiled to repeat). ``tensors``: A, B, C and the bias as
    launched (C where there is none), whose alignment the kernel was compiled for."""
    compiled = mm_launcher.compiled_for(args, constexprs)
    if compiled is None:
        return None
    splits = grid[1]
    step = (
        compiled,
        (*grid, 1),
        (*args, *compiled[1]),
        (0, 1, 4, 3) if splits > 1 else (0, 1, 2, 3),
    )
    aligned = tuple(t.data_ptr() & 15 == 0 for t in tensors)
    return product_lane(step, summed, has_bias, aligned, args[0].device.index,
                        tuple(target.shape) if splits > 1 else None)  # fmt: skip


def matmul_ruled_into(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor,
                      bias: torch.Tensor | None = None, alpha: float = 1.0,
                      beta: float = 1.0, lane_out: list | None = None) -> torch.Tensor:  # fmt: skip
    """What the entry points (``mm``, ``bmm``, ``addmm``, ``baddbmm``) run: a 16-bit
    product on the kernel and tile the shape rule ranks first
    (:func:`~opbench.kernels._lib.matmul_rule.ranked`, fitted on the tuning half of the
    traces), a TMA candidate the TMA path declines passing to the next; anything else
    (float32, the interpreter, an empty product) as :func:`matmul_into` serves it, and a
    product under the rule's domain on the small-product rule's tile where
    :data:`SMALL_RULE` is on and it has one
    (:func:`~opbench.kernels._lib.matmul_rule.in_small_domain`). The convolutions keep
    calling :func:`matmul_into` (the rule was fitted on matmul-family products only). ``lane_out`` collects the served
    launch's lane where it has one (:mod:`~opbench.kernels._lib.matmul_lanes`)."""
    B, M, K = a.shape
    N = b.shape[2]
    if _INTERPRETING or a.dtype == torch.float32:
        return matmul_into(out, a, b, bias, alpha, beta, None, lane_out)
    if not in_domain(B, M, N, K):
        cfg = None  # the tables'
        if SMALL_RULE and in_small_domain(B, M, N, K):
            cfg = ranked_small(layout_class(a, b), M, N, K, B)[0][1] or None  # (): the tables
        return matmul_into(out, a, b, bias, alpha, beta, cfg, lane_out)
    for kind, cfg in ranked(layout_class(a, b), M, N, K, B):
        if kind == "ptr":
            return matmul_into(out, a, b, bias, alpha, beta, cfg, lane_out)
        if kind == "tmab":
            from opbench.kernels._lib.matmul_tma_batched import tma_bmm_into  # the GPU's

            if tma_bmm_into(out, a, b, bias, alpha, beta, cfg, lane_out):
                return out
            continue
        from opbench.kernels._lib.matmul_tma import tma_matmul_into  # the GPU's TMA path

        if tma_matmul_into(out, a, b, bias, alpha, beta, cfg, lane_out):
            return out
    return matmul_into(out, a, b, bias, alpha, beta, None, lane_out)


# ----------------------------------------------------------------------------- ATen entry points


def _type_name(dtype: torch.dtype) -> str:
    return {torch.float16: "c10::Half", torch.bfloat16: "c10::BFloat16", torch.float32: "float",
            torch.float64: "double"}.get(dtype, str(dtype).removeprefix("torch."))  # fmt: skip


def _scalar_name(dtype: torch.dtype) -> str:
    return {torch.float16: "Half", torch.bfloat16: "BFloat16", torch.float32: "Float",
            torch.float64: "Double"}.get(dtype, str(dtype).removeprefix("torch."))  # fmt: skip


def _served(dtype: torch.dtype) -> None:
    """Decline what we do not multiply (float64, integers, complex): PyTorch serves it."""
    if dtype not in _TL:
        raise NotImplementedError(f"matmul on {dtype}: no Triton kernel here")


def _check_mm(mat1: torch.Tensor, mat2: torch.Tensor) -> None:
    """Eager's checks and messages for two matrices, in its order."""
    if mat1.dim() != 2:
        raise RuntimeError("self must be a matrix")
    if mat2.dim() != 2:
        raise RuntimeError("mat2 must be a matrix")
    if mat1.shape[1] != mat2.shape[0]:
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({mat1.shape[0]}x{mat1.shape[1]} "
            f"and {mat2.shape[0]}x{mat2.shape[1]})"
        )
    if mat1.dtype != mat2.dtype:
        raise RuntimeError(
            "expected m1 and m2 to have the same dtype, but got: "
            f"{_type_name(mat1.dtype)} != {_type_name(mat2.dtype)}"
        )


def _check_bmm(b1: torch.Tensor, b2: torch.Tensor) -> None:
    if b1.dim() != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    if b2.dim() != 3:
        raise RuntimeError("batch2 must be a 3D tensor")
    if b1.shape[0] != b2.shape[0] or b1.shape[2] != b2.shape[1]:
        raise RuntimeError(
            "Expected size for first two dimensions of batch2 tensor to be: "
            f"[{b1.shape[0]}, {b1.shape[2]}] but got: [{b2.shape[0]}, {b2.shape[1]}]."
        )
    if b1.dtype != b2.dtype:
        raise RuntimeError(
            f"expected scalar type {_scalar_name(b1.dtype)} but found {_scalar_name(b2.dtype)}"
        )


def _bias_for(bias: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    try:
        return bias.expand(shape)
    except RuntimeError:
        raise RuntimeError(
            f"The expanded size of the tensor ({shape[-1]}) must match the existing size "
            f"({bias.shape[-1] if bias.dim() else 1}) at non-singleton dimension "
            f"{len(shape) - 1}.  Target sizes: {list(shape)}.  Tensor sizes: "
            f"{list(bias.shape)}"
        ) from None


def _ruled_keeping_lane(key: tuple | None, out: torch.Tensor, a: torch.Tensor, b: torch.Tensor,
                        bias: torch.Tensor | None = None, alpha: Any = 1.0,
                        beta: Any = 1.0) -> None:  # fmt: skip
    """:func:`matmul_ruled_into` for an entry point's first call of ``key``, keeping the
    lane of the launch that served it, where it has one."""
    lanes: list = []
    matmul_ruled_into(out, a, b, bias, alpha, beta, lanes)
    keep(key, lanes)


def mm(self: torch.Tensor, mat2: torch.Tensor) -> torch.Tensor:
    """aten::mm: ``self @ mat2`` for 2-D operands."""
    key = lane_key(self, mat2)
    shape = (self.shape[0], mat2.shape[1])
    out = laned(key, shape, self, mat2, None)
    if out is not None:
        return out
    _check_mm(self, mat2)
    _served(self.dtype)
    out = torch.empty(shape, dtype=self.dtype, device=self.device)
    _ruled_keeping_lane(key, out.unsqueeze(0), self.unsqueeze(0), mat2.unsqueeze(0))
    return out


def bmm(self: torch.Tensor, mat2: torch.Tensor) -> torch.Tensor:
    """aten::bmm: a batch of ``self[i] @ mat2[i]``."""
    key = lane_key(self, mat2)
    shape = (self.shape[0], self.shape[1], mat2.shape[2])
    out = laned(key, shape, self, mat2, None)
    if out is not None:
        return out
    _check_bmm(self, mat2)
    _served(self.dtype)
    out = torch.empty(shape, dtype=self.dtype, device=self.device)
    _ruled_keeping_lane(key, out, self, mat2)
    return out


def addmm(self: torch.Tensor, mat1: torch.Tensor, mat2: torch.Tensor, *, beta: Any = 1,
          alpha: Any = 1) -> torch.Tensor:  # fmt: skip
    """aten::addmm: ``beta * self + alpha * (mat1 @ mat2)``; ``self`` broadcast to the
    result, ignored when ``beta == 0``."""
    key = lane_key(self, mat1, mat2, extra=(alpha, beta))
    shape = (mat1.shape[0], mat2.shape[1])
    out = laned(key, shape, mat1, mat2, self, alpha, beta)
    if out is not None:
        return out
    # Like matmul.baddbmm's checks, kept apart: eager's own mm error wording, word for word
    _check_mm(mat1, mat2)
    if self.dtype != mat1.dtype:
        raise RuntimeError(
            f"self and mat2 must have the same dtype, but got {_scalar_name(self.dtype)} and "
            f"{_scalar_name(mat2.dtype)}"
        )
    _served(mat1.dtype)
    _check_scalars(alpha, beta)
    bias = _bias_for(self, shape)
    out = torch.empty(shape, dtype=mat1.dtype, device=mat1.device)
    _ruled_keeping_lane(key, out.unsqueeze(0), mat1.unsqueeze(0), mat2.unsqueeze(0),
                        bias.unsqueeze(0), alpha, beta)  # fmt: skip
    return out


def baddbmm(self: torch.Tensor, batch1: torch.Tensor, batch2: torch.Tensor, *,
            beta: Any = 1, alpha: Any = 1) -> torch.Tensor:  # fmt: skip
    """aten::baddbmm: ``beta * self + alpha * (batch1 @ batch2)`` per batch."""
    key = lane_key(self, batch1, batch2, extra=(alpha, beta))
    shape = (batch1.shape[0], batch1.shape[1], batch2.shape[2])
    out = laned(key, shape, batch1, batch2, self, alpha, beta)
    if out is not None:
        return out
    # Like matmul.addmm's checks, kept apart: eager's own bmm error wording, word for word
    _check_bmm(batch1, batch2)
    if self.dtype != batch1.dtype:
        raise RuntimeError(
            f"Input dtypes must be the same, got: input {_type_name(self.dtype)}, batch1: "
            f"{_type_name(batch1.dtype)}, batch2: {_type_name(batch2.dtype)}"
        )
    _served(batch1.dtype)
    _check_scalars(alpha, beta)
    bias = _bias_for(self, shape)
    out = torch.empty(shape, dtype=batch1.dtype, device=batch1.device)
    _ruled_keeping_lane(key, out, batch1, batch2, bias, alpha, beta)
    return out


def _check_scalars(alpha: Any, beta: Any) -> None:
    for s in (alpha, beta):
        if isinstance(s, complex) or isinstance(s, torch.Tensor):
            raise NotImplementedError("complex or tensor alpha/beta: no Triton kernel here")


# the gate repeats these functions' launches (native_launch.declare_replay)
declare_replay(
    addmm,
    baddbmm,
    bmm,
    mm,
)
