"""aten::leaky_relu_backward.default: self > 0 ? grad : grad * negative_slope.

Triton kernel and launcher: :mod:`opbench.kernels._lib.activations`."""

from opbench.kernels._lib.activations import leaky_relu_backward as leaky_relu_backward_kernel_impl

__all__ = ["leaky_relu_backward_kernel_impl"]
