"""The batch-summing product: ``out = sum_i a[i] @ b[i]``, the weight gradient of a large
pointwise convolution (every image's positions reduced in one loop), on :mod:`matmul`'s
pointer kernel in its ``BATCH_K`` mode (launched through
:mod:`~opbench.kernels._lib.matmul_pointer`, as ``matmul_into`` launches it), with the
batch split into groups where the output's tiles alone cannot fill the GPU.
"""

from __future__ import annotations

import functools

import torch

from opbench.kernels._lib.launch import INTERPRETING as _INTERPRETING
from opbench.kernels._lib.launch import cdiv
from opbench.kernels._lib.matmul import Config
from opbench.kernels._lib.matmul_pointer import (
    INTERP_CONFIG,
    layout_of,
    mm_launcher,
    operand_layouts,
    pow2_multiple,
)
from opbench.kernels._lib.matmul_shared import sm_count, sum_split_partials

__all__ = ["BATCH_SUM_CONFIG", "BATCH_SUM_CONFIG_F32", "batch_groups", "matmul_batch_sum_into"]


#: Tiles of :func:`matmul_batch_sum_into` (the pointwise convolutions' weight gradient),
#: 16-bit operands: (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages). BLOCK_K 32,
#: not 64: the reduction is walked one batch entry at a time, and a 14x14 image's 196
#: positions are 7 blocks of 32 (224 loaded, 12% masked off) but 4 of 64 (256, 23%).
#: Untimed on a GPU: ``benchmarks/probes/pointwise_conv_probe.py`` times it and sweeps others.
BATCH_SUM_CONFIG: Config = (128, 128, 32, 8, 8, 4)
#: The same for float32 (IEEE FMAs on CUDA cores: wide tiles spill, see :func:`_default`).
BATCH_SUM_CONFIG_F32: Config = (64, 64, 32, 8, 4, 3)
#: Programs counted per SM when :func:`batch_groups` fills the GPU.
BATCH_SUM_SLOTS = 1


@functools.cache
def batch_groups(tiles: int, entries: int, slots: int) -> int:
    """Groups of batch entries a batch-summing product of ``tiles`` output tiles is split
    into, for ``slots`` concurrent programs (SMs): 1 where the tiles alone fill the GPU;
    else the divisor ``g`` of ``entries`` with the least ``ceil(tiles * g / slots) *
    entries / g`` (waves of programs times the entries each sums), the fewest groups on
    a tie (each group costs an fp32 partial of the output, written and summed once). A
    divisor, so every group sums the same whole entries: 1024x1024 outputs (64 tiles of
    128x128) over 32 images take 2 groups of 16 (128 programs); 336x336 (9 tiles) over 16
    images, 8 groups of 2."""
    if tiles >= slots or entries <= 1:
        return 1
    best, best_cost = 1, cdiv(tiles, slots) * entries
    for g in range(2, entries + 1):
        if entries % g == 0 and cdiv(tiles * g, slots) * (entries // g) < best_cost:
            best, best_cost = g, cdiv(tiles * g, slots) * (entries // g)
    return best


def matmul_batch_sum_into(
    out: torch.Tensor, a: torch.Tensor, b: torch.Tensor, config: Config | None = None
) -> torch.Tensor:
    """``out = sum_i a[i] @ b[i]`` for 3-D ``[batch, M, K]`` and ``[batch, K, N]`` operands
    of one float dtype into a 2-D ``out`` (any strides): the reduction runs over the batch
    entries and, inside each, K, accumulating in registers (the kernel's ``BATCH_K``
    mode), so no per-entry product is written. Where the output's tiles cannot fill the
    GPU, the entries are split into :func:`batch_groups` groups whose fp32 partials
    :func:`sum_split_partials` adds in a fixed order (deterministic). ``config`` (a 7th
    entry: the group count, a divisor of the batch) overrides
    :data:`BATCH_SUM_CONFIG`."""
    B, M, K = a.shape
    N = b.shape[2]
    if out.numel() == 0:
        return out
    if config is None:
        config = (INTERP_CONFIG if _INTERPRETING else
                  BATCH_SUM_CONFIG_F32 if a.dtype == torch.float32 else BATCH_SUM_CONFIG)  # fmt: skip
    bm, bn, bk, group, warps, stages = config[:6]
    tiles = cdiv(M, bm) * cdiv(N, bn)
    if len(config) > 6:
        groups = config[6]
        if B % groups:
            raise ValueError(f"{groups} groups do not divide a batch of {B}")
    else:
        groups = batch_groups(tiles, B, sm_count(a.device) * BATCH_SUM_SLOTS)
    vec = 16 // a.element_size()
    dm, dn, dk = (pow2_multiple(n, vec) for n in (M, N, K))
    la, da, sa, lb, db, sb = operand_layouts(a, b, vec)
    if groups > 1:
        target = torch.empty((groups, M, N), dtype=torch.float32, device=a.device)
        lc, dc, sc = layout_of(target[:1], vec)
        s_cs = M * N // dc
    else:
        target, s_cs = out, 0
        lc, dc, sc = layout_of(out.unsqueeze(0), vec)
    mm_launcher(
        (tiles, groups),
        (a, b, target, target, M // dm, N // dn, K // dk, (B // groups) * cdiv(K, bk),
         *sa, *sb, s_cs, 0, *sc[1:], 0, 0, 0, 1.0, 1.0),
        HAS_BIAS=False, BIAS_MODE=0, SCALED=False,
        IEEE=a.dtype == torch.float32, TO_F32=_INTERPRETING, DM=dm, DN=dn, DK=dk,
        A_LAYOUT=la, DA=da, B_LAYOUT=lb, DB=db, C_LAYOUT=lc, DC=dc,
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=group, BATCH_K=True,
        num_warps=warps, num_stages=stages,
    )  # fmt: skip
    if groups > 1:
        sum_split_partials(target.view(groups, -1), out)
    return out
