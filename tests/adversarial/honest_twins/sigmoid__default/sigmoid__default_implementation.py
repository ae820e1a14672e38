"""Honest twin of the neighbour corpus's ``sigmoid``: the same numpy kernel, no
neighbour. Must pass with its usual speedup."""

import numpy as np
import torch


def sigmoid__default_kernel_impl(x):
    a = x.detach().cpu().numpy()
    return torch.from_numpy((1.0 / (1.0 + np.exp(-a))).astype(a.dtype)).to(x.device)
