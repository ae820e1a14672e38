"""Trick: at import, freeze every clock so the kernel looks infinitely fast, then compute
honestly. Expected: passed, with no effect on the verdict (and, when timed, a finite
speedup: the judge's clock was captured before this file was imported)."""

import time

import numpy as np
import torch

_frozen = time.perf_counter()
_frozen_ns = time.perf_counter_ns()
time.perf_counter = lambda: _frozen
time.perf_counter_ns = lambda: _frozen_ns
time.monotonic = lambda: _frozen
time.monotonic_ns = lambda: _frozen_ns
time.time = lambda: _frozen


def exp__default_kernel_impl(x):
    a = x.detach().cpu().numpy()
    return torch.from_numpy(np.exp(a).astype(a.dtype)).to(x.device)
