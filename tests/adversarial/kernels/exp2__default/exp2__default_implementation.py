"""Trick: delegate through a name built at run time, which no static scan can resolve.
Expected: calls_pytorch (the runtime guard sees the call)."""

import torch

_NAME = "".join(chr(c) for c in (101, 120, 112, 50))


def exp2__default_kernel_impl(x):
    return getattr(torch, _NAME)(x)
