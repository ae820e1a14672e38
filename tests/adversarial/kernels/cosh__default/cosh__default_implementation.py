"""Trick: compute once per shape, then return the cached answer for every later call.
Expected: wrong_result (each trial has fresh inputs)."""

import numpy as np
import torch

_CACHE = {}


def cosh__default_kernel_impl(x):
    key = (tuple(x.shape), x.dtype)
    if key not in _CACHE:
        a = x.detach().cpu().numpy()
        _CACHE[key] = np.cosh(a).astype(a.dtype)
    return torch.from_numpy(_CACHE[key].copy()).to(x.device)
