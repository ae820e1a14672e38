"""Matmul configurations per shape bucket, tuned ahead of time on the GPU.

Written by ``benchmarks/tune_matmul.py`` (which records the device, the versions and the
command below); edit by rerunning it, not by hand. Keys are
:func:`opbench.kernels._lib.matmul.bucket` strings (element size and the size classes of
M, N and K); values are (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages).
Empty until the first tuning run: every bucket uses the untuned defaults.
"""

TUNED: dict[str, tuple[int, int, int, int, int, int]] = {}
