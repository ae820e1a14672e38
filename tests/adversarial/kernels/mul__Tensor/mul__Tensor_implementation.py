"""Honest: elementwise multiply with numpy. Must pass alongside the tricks."""

import numpy as np
import torch


def mul__Tensor_kernel_impl(a, b):
    x, y = a.detach().cpu().numpy(), b.detach().cpu().numpy()
    return torch.from_numpy(np.asarray(x * y, dtype=x.dtype)).to(a.device)
