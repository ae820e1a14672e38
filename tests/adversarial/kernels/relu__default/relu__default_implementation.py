"""Honest: relu with numpy. Must pass in the same run as every trick below."""

import numpy as np
import torch


def relu__default_kernel_impl(x):
    a = x.detach().cpu().numpy()
    return torch.from_numpy(np.maximum(a, 0).astype(a.dtype)).to(x.device)
