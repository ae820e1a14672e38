"""aten::neg.default.

Triton kernel and launcher: :mod:`opbench.kernels._lib.pointwise`."""

from opbench.kernels._lib.pointwise import neg as neg_kernel_impl

__all__ = ["neg_kernel_impl"]
