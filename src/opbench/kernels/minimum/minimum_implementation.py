"""aten::minimum.default: elementwise minimum, NaN propagating.

Triton kernel and launcher: :mod:`opbench.kernels._lib.math_ops`."""

from opbench.kernels._lib.math_ops import minimum as minimum_kernel_impl

__all__ = ["minimum_kernel_impl"]
