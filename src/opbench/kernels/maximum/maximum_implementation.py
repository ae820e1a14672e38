"""aten::maximum.default: elementwise maximum, NaN propagating.

Triton kernel and launcher: :mod:`opbench.kernels._lib.pointwise`."""

from opbench.kernels._lib.pointwise import maximum as maximum_kernel_impl

__all__ = ["maximum_kernel_impl"]
