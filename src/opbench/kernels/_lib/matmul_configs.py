"""Matmul configurations per shape bucket, tuned ahead of time on the GPU.

Written by ``benchmarks/tune_matmul.py``; rerun it rather than editing by hand. Keys are
:func:`opbench.kernels._lib.matmul.bucket` strings (element size and the size classes of
M, N and K); values are (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages).
Buckets missing here use the kernel's untuned defaults (also where a default won).

Tuned on NVIDIA H100 80GB HBM3, torch 2.11.0+cu130, Triton 3.6.0: tune_matmul.py --traces .gpu_data/traces --journal /root/out/tune-mm.jsonl --report --write --out /root/out/matmul-tuning-h100
"""

TUNED: dict[str, tuple[int, int, int, int, int, int]] = {
    "2:0:0:1": (16, 16, 64, 8, 2, 3),
    "2:0:2:1": (16, 16, 64, 8, 2, 3),
    "2:0:2:2": (32, 128, 64, 8, 4, 4),
    "2:1:0:1": (128, 32, 64, 8, 4, 4),
    "2:1:1:0": (64, 64, 32, 8, 2, 5),
    "2:1:1:1": (64, 64, 64, 8, 4, 4),
    "2:1:1:2": (16, 16, 64, 8, 2, 3),
    "2:1:1:3": (64, 64, 64, 8, 4, 4),
    "2:1:2:1": (64, 64, 64, 8, 4, 4),
    "2:1:2:2": (64, 64, 32, 8, 2, 5),
    "2:1:2:3": (128, 32, 64, 8, 4, 4),
    "2:1:3:2": (16, 64, 128, 8, 4, 4),
    "2:1:3:3": (16, 128, 128, 8, 4, 3),
    "2:2:0:2": (32, 32, 64, 8, 2, 4),
    "2:2:1:1": (64, 64, 64, 8, 4, 4),
    "2:2:1:2": (64, 64, 64, 8, 4, 4),
    "2:2:1:3": (128, 128, 32, 8, 4, 4),
    "2:2:2:0": (128, 128, 32, 8, 4, 4),
    "2:2:2:2": (16, 64, 128, 8, 4, 4),
    "2:2:2:3": (64, 64, 64, 8, 4, 4),
    "2:2:3:1": (64, 128, 64, 8, 4, 4),
    "2:2:3:2": (128, 64, 64, 8, 4, 4),
    "2:2:3:3": (64, 64, 64, 8, 4, 4),
    "2:3:0:1": (128, 32, 64, 8, 4, 4),
    "2:3:1:0": (64, 64, 32, 8, 2, 5),
    "2:3:1:1": (64, 64, 64, 8, 4, 4),
    "2:3:1:2": (64, 64, 64, 8, 4, 4),
    "2:3:2:1": (64, 128, 64, 8, 4, 4),
    "2:3:2:2": (128, 64, 64, 8, 4, 4),
    "2:3:2:3": (128, 64, 64, 8, 4, 4),
    "2:3:3:1": (128, 128, 32, 8, 4, 4),
    "4:1:1:1": (16, 64, 32, 8, 2, 3),
}
