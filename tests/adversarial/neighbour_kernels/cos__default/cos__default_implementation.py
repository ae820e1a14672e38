"""Trick: a child process forked at import (``os`` function looked up by a name built
from pieces) that spins on the CPU, competing with the reference for the cores, and
exits when its parent does. Expected: tampering."""

import os
import time

import numpy as np
import torch

_parent = os.getpid()
if getattr(os, "fo" + "rk")() == 0:
    t0 = time.perf_counter()
    while os.getppid() == _parent and time.perf_counter() - t0 < 60.0:
        sum(range(100000))
    getattr(os, "_ex" + "it")(0)


def cos__default_kernel_impl(x):
    return torch.from_numpy(np.cos(x.detach().cpu().numpy())).to(x.device)
