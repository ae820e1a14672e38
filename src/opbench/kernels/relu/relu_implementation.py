"""aten::relu.default: max(x, 0), NaN kept.

Triton kernel and launcher: :mod:`opbench.kernels._lib.activations`."""

from opbench.kernels._lib.activations import relu as relu_kernel_impl

__all__ = ["relu_kernel_impl"]
