"""Trick: never return. Expected: timeout (the worker is killed and replaced)."""


def abs__default_kernel_impl(x):
    n = 0
    while True:
        n += 1
