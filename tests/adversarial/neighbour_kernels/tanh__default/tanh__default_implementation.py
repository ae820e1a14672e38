"""Trick: a spawned child process (a fresh Python interpreter started through
``subprocess``, imported by a name built from pieces) that spins on the CPU while the
worker lives. Expected: tampering."""

import importlib
import os
import sys

import numpy as np
import torch

_code = (
    "import os, time\n"
    f"p = {os.getpid()}\n"
    "t0 = time.perf_counter()\n"
    "while time.perf_counter() - t0 < 60.0:\n"
    "    sum(range(100000))\n"
    "    if os.getppid() != p: break\n"
)
_child = importlib.import_module("sub" + "process").Popen([sys.executable, "-c", _code])


def tanh__default_kernel_impl(x):
    return torch.from_numpy(np.tanh(x.detach().cpu().numpy())).to(x.device)
