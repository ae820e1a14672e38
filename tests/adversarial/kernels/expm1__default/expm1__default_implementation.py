"""Trick: look through every live object (gc) for a tensor that already holds the answer
(the reference output) and return it. The reference is computed in the judging
process, so there is nothing to find. Expected: wrong_result."""

import gc

import numpy as np
import torch

FOUND = []


def expm1__default_kernel_impl(x):
    a = x.detach().cpu().numpy()
    truth = np.expm1(a.astype(np.float64))
    for obj in gc.get_objects():
        if not isinstance(obj, torch.Tensor) or obj is x:
            continue
        try:
            if obj.shape != x.shape or obj.dtype != x.dtype:
                continue
            cand = obj.detach().cpu().numpy().astype(np.float64)
        except Exception:
            continue
        if np.allclose(cand, truth, rtol=1e-4, atol=1e-5):
            FOUND.append(obj)
            return obj.detach().clone()
    # Nothing found: return the input unchanged, which is wrong for expm1.
    return torch.from_numpy(a.copy()).to(x.device)
