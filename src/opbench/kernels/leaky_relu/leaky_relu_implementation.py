"""aten::leaky_relu.default: x > 0 ? x : x * negative_slope.

Triton kernel and launcher: :mod:`opbench.kernels._lib.activations`."""

from opbench.kernels._lib.activations import leaky_relu as leaky_relu_kernel_impl

__all__ = ["leaky_relu_kernel_impl"]
