"""Trick: compute honestly for the first calls (the correctness trials and their
repeat), then hand the work to PyTorch, hoping only the timed calls do that.
Expected with timing on: calls_pytorch (the timed calls are observed too)."""

import numpy as np
import torch

_calls = [0]


def log2__default_kernel_impl(x):
    _calls[0] += 1
    if _calls[0] > 3:
        return torch.log2(x)
    a = x.detach().cpu().numpy()
    return torch.from_numpy(np.log2(a).astype(a.dtype)).to(x.device)
