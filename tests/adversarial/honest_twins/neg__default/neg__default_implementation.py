"""Honest twin of the neighbour corpus's `neg`: the same numpy kernel, no neighbour.
Must pass with its usual speedup."""

import numpy as np
import torch


def neg__default_kernel_impl(x):
    return torch.from_numpy(np.negative(x.detach().cpu().numpy())).to(x.device)
