"""Trick: export PyTorch's own overload as the kernel, so the worker takes it for the aten
backend and switches its recorders off. Expected: calls_pytorch (whether a test is
observed follows from --backend, never from the kernel object)."""

import torch

sinh__default_kernel_impl = torch.ops.aten.sinh.default
