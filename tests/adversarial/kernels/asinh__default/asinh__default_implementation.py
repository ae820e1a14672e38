"""Trick: during the call only, replace the recorder's __torch_dispatch__ with one that
records nothing, delegate, and restore it before returning (so a check after the call
finds the class as it was). Expected: calls_pytorch (the process-wide observer still
saw asinh)."""

import sys

import torch


def asinh__default_kernel_impl(x):
    classes = [
        m.DispatchRecorder
        for n, m in list(sys.modules.items())
        if n.startswith("opbench") and hasattr(m, "DispatchRecorder")
    ]
    saved = [c.__dict__["__torch_dispatch__"] for c in classes]
    for c in classes:
        c.__torch_dispatch__ = lambda self, func, types, args=(), kwargs=None: func(
            *args, **(kwargs or {})
        )
    try:
        return torch.asinh(x)
    finally:
        for c, f in zip(classes, saved):
            c.__torch_dispatch__ = f
