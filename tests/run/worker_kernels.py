"""Kernel directories the worker tests share: an honest numpy relu and a neg that
segfaults, written in BackendBench's folder layout."""

from __future__ import annotations

import textwrap
from pathlib import Path

KERNELS = {
    "relu__default": """
        import numpy as np
        import torch

        def relu__default_kernel_impl(x):
            a = x.detach().numpy()
            return torch.from_numpy(np.maximum(a, 0).astype(a.dtype))
    """,
    "neg__default": """
        import faulthandler

        def neg__default_kernel_impl(x):
            faulthandler._sigsegv()  # a real SIGSEGV (ctypes would be stopped by the scan)
    """,
}


def write_kernel_dir(root: Path, kernels: dict[str, str]) -> Path:
    """``root/<folder>/<folder>_implementation.py`` for each kernel text; returns ``root``."""
    for folder, text in kernels.items():
        (root / folder).mkdir(parents=True)
        (root / folder / f"{folder}_implementation.py").write_text(textwrap.dedent(text))
    return root
