"""Honest twin of the neighbour corpus's `cos`: the same numpy kernel, no neighbour.
Must pass with its usual speedup."""

import numpy as np
import torch


def cos__default_kernel_impl(x):
    return torch.from_numpy(np.cos(x.detach().cpu().numpy())).to(x.device)
