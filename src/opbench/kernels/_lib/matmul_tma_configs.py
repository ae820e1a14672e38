"""The products the TMA matmul kernel (:mod:`~opbench.kernels._lib.matmul_tma`: 16-bit,
batch 1) runs when ``matmul_into`` is given no configuration, with its configuration
``(BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages)``: the traced products where
it beat the pointer-loading kernel on the H100 (torch 2.11, Triton 3.6, 2026-11-26:
``benchmarks/tune/tma_matmul_probe.py``; the comments give eager / that kernel / TMA in ms).
Keyed like ``matmul_configs.SHAPES`` (element size, batch, M, N, K); a product TMA
cannot take (unaligned, batched, a full bias matrix) falls back to the SHAPES or bucket
configuration. Kept apart from ``matmul_configs``, which ``tune_matmul.py --write``
regenerates from a template."""

from __future__ import annotations

TMA_SHAPES_ON = "NVIDIA H100 80GB HBM3, torch 2.11.0+cu130, Triton 3.6.0: tma_matmul_probe.py"

TMA_SHAPES: dict[tuple[int, int, int, int, int], tuple[int, ...]] = {
    (2, 1, 8192, 768, 768): (128, 128, 64, 8, 4, 4),  # mm .0208/.0325/.0241; addmm .0219/.0285/.0251
    (2, 1, 768, 768, 2048): (64, 128, 64, 8, 4, 5),  # mm, A stored [K, M]: .0111/.0170/.0137
    (2, 1, 1024, 1024, 2048): (64, 128, 64, 8, 4, 5),  # bmm, A stored [K, M]: .0119/.0176/.0149
    (2, 1, 512, 1536, 1536): (64, 128, 64, 8, 4, 5),  # addmm .0116/.0153/.0136
    (2, 1, 1024, 1024, 1024): (64, 128, 64, 8, 4, 5),  # mm .0093/.0124/.0102
    (2, 1, 2048, 1024, 1024): (128, 128, 64, 8, 4, 4),  # addmm .0132/.0155/.0138; bmm .0122/.0148/.0132
}  # fmt: skip
