"""aten::maximum.default: elementwise maximum, NaN propagating.

Triton kernel and launcher: :mod:`opbench.kernels._lib.math_ops`."""

from opbench.kernels._lib.math_ops import maximum as maximum_kernel_impl

__all__ = ["maximum_kernel_impl"]
