"""Trick: sys.exit() from inside the kernel. Expected: crash (the worker is gone)."""

import sys


def sin__default_kernel_impl(x):
    sys.exit(0)
