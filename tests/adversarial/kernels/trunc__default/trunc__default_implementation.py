"""Trick: open the judging process's memory (/proc/<pid>/mem) to read the expected
answer. Raises if it cannot. Expected under the sandbox: error (the harness is not in
the worker's PID namespace)."""

import os

import numpy as np
import torch


def trunc__default_kernel_impl(x):
    pid = int(os.environ.get("OPBENCH_ADV_HARNESS_PID") or os.getppid())
    with open(f"/proc/{pid}/mem", "rb") as f:
        with open(f"/proc/{pid}/maps") as m:
            start = int(m.readline().split("-")[0], 16)
        f.seek(start)
        f.read(16)
    a = x.detach().cpu().numpy()
    return torch.from_numpy(np.trunc(a).astype(a.dtype)).to(x.device)
