"""Trick: call PyTorch with the Python dispatch key switched off, so no
TorchDispatchMode sees the call. Expected: calls_pytorch (and tampering from the scan)."""

import torch


def log__default_kernel_impl(x):
    with torch._C._DisableTorchDispatch():
        return torch.log(x)
