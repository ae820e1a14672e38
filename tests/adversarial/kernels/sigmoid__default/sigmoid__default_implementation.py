"""Trick: allocate (and touch) memory until something stops it. Expected: oom, with a
small memory_limit_mb. Bounded at 8 GB so a broken limit cannot take the machine down."""

import numpy as np


def sigmoid__default_kernel_impl(x):
    hoard = []
    for _ in range(64):  # 64 x 128 MB
        hoard.append(np.ones(32 << 20, dtype=np.float32))
    raise RuntimeError(f"allocated {len(hoard) * 128} MB and nobody stopped me")
