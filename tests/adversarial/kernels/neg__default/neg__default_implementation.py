"""Trick: dereference NULL (segfault). Expected: crash; after --max-crashes-per-op
crashes the op's remaining tests are recorded as not run."""

import ctypes


def neg__default_kernel_impl(x):
    ctypes.string_at(0)
    return -x
