"""Trick: hand the work to PyTorch's own kernel. Expected: calls_pytorch."""

import torch


def add__Tensor_kernel_impl(self, other, *, alpha=1):
    return torch.add(self, other, alpha=alpha)
