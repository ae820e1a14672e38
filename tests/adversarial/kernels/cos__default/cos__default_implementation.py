"""Trick: os._exit(0), which skips every handler. Expected: crash."""

import os


def cos__default_kernel_impl(x):
    os._exit(0)
