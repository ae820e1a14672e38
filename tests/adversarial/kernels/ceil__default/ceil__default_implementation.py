"""Trick: write outside the kernel's folder: a file into the run directory (to tamper
with results) and one into the kernel directory (the repo). Raises if the write fails.
Expected under the sandbox: error, and neither file exists afterwards."""

import os
from pathlib import Path

import numpy as np
import torch


def ceil__default_kernel_impl(x):
    run_dir = os.environ.get("OPBENCH_ADV_RUN_DIR")
    if run_dir:
        (Path(run_dir) / "pwned.txt").write_text("a kernel was here")
    (Path(__file__).resolve().parents[1] / "pwned.txt").write_text("a kernel was here")
    a = x.detach().cpu().numpy()
    return torch.from_numpy(np.ceil(a).astype(a.dtype)).to(x.device)
