"""Honest twin of the neighbour corpus's `tanh`: the same numpy kernel, no neighbour.
Must pass with its usual speedup."""

import numpy as np
import torch


def tanh__default_kernel_impl(x):
    return torch.from_numpy(np.tanh(x.detach().cpu().numpy())).to(x.device)
