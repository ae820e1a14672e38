"""Honest twin of the neighbour corpus's `sin`: the same numpy kernel, no neighbour.
Must pass with its usual speedup."""

import numpy as np
import torch


def sin__default_kernel_impl(x):
    return torch.from_numpy(np.sin(x.detach().cpu().numpy())).to(x.device)
