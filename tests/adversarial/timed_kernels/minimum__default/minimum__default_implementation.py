"""Trick: compute once per input object, then return the remembered answer while the same
tensors come back unchanged (same objects, same version counters). Right for every
correctness trial (fresh tensors each time); once timed on one set of inputs it does no
work at all. Expected with timing on: cheat (the timed calls' inputs change draw in the
same tensors, and the last call always holds the other draw)."""

import numpy as np
import torch

_seen = []


def minimum__default_kernel_impl(a, b):
    if _seen and _seen[0] is a and _seen[1] is b and _seen[2] == (a._version, b._version):
        return _seen[3]
    out = torch.from_numpy(np.minimum(a.detach().cpu().numpy(), b.detach().cpu().numpy()))
    _seen[:] = [a, b, (a._version, b._version), out.to(a.device)]
    return _seen[3]
