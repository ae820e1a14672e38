"""Trick: hand the work to PyTorch on a concurrent.futures pool thread.
Expected: calls_pytorch."""

from concurrent.futures import ThreadPoolExecutor

import torch

_POOL = ThreadPoolExecutor(max_workers=1)


def atan2__default_kernel_impl(a, b):
    return _POOL.submit(torch.atan2, a, b).result()
