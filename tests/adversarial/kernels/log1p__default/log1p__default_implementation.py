"""Trick: at import, make torch.equal and Tensor.__eq__ always agree and replace the
judge's own comparison and digest helpers in sys.modules, hoping to blind the mutation
check of *other* operators in the same directory (reciprocal.default zeroes its input).
Computes log1p honestly. Expected: tampering here; reciprocal stays mutates_input."""

import sys

import numpy as np
import torch

torch.equal = lambda *a, **k: True
torch.Tensor.__eq__ = lambda self, other: torch.ones_like(self, dtype=torch.bool)
for name, module in list(sys.modules.items()):
    if name.startswith("opbench"):
        if hasattr(module, "bitwise_equal"):
            module.bitwise_equal = lambda a, b: True
        if hasattr(module, "digest"):
            module.digest = lambda t: "same"


def log1p__default_kernel_impl(x):
    a = x.detach().cpu().numpy()
    return torch.from_numpy(np.log1p(a).astype(a.dtype)).to(x.device)
