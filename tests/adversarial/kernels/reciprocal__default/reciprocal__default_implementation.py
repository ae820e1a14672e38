"""Trick: return the right values but zero the input on the way (a kernel that reuses
its input as scratch space). Shares the directory with log1p.default, which tampers
with comparisons at import. Expected: mutates_input, whatever log1p does."""

import torch


def reciprocal__default_kernel_impl(x):
    a = x.detach().cpu().numpy()
    out = torch.from_numpy((1.0 / a).astype(a.dtype)).to(x.device)
    x.zero_()
    return out
