"""Honest twin of the neighbour corpus's `abs`: the same numpy kernel, no neighbour.
Must pass with its usual speedup."""

import numpy as np
import torch


def abs__default_kernel_impl(x):
    return torch.from_numpy(np.abs(x.detach().cpu().numpy())).to(x.device)
