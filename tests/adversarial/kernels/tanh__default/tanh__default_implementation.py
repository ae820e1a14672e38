"""Trick: at import, make every comparison helper say "equal", then return a wrong
answer. Expected: wrong_result (the verdict is made outside the worker)."""

import numpy as np
import torch
import torch.testing

torch.allclose = lambda *a, **k: True
torch.Tensor.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True
torch.testing.assert_close = lambda *a, **k: None
torch.isclose = lambda a, b, *r, **k: torch.ones_like(a, dtype=torch.bool)


def tanh__default_kernel_impl(x):
    a = x.detach().cpu().numpy()
    return torch.from_numpy((np.tanh(a) + 1).astype(a.dtype)).to(x.device)
