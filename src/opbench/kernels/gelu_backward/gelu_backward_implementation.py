"""aten::gelu_backward.default, both approximations.

Triton kernel and launcher: :mod:`opbench.kernels._lib.activations`."""

from opbench.kernels._lib.activations import gelu_backward as gelu_backward_kernel_impl

__all__ = ["gelu_backward_kernel_impl"]
