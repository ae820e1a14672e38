"""aten::minimum.out, written into out.

Triton kernel and launcher: :mod:`opbench.kernels._lib.pointwise`."""

from opbench.kernels._lib.pointwise import minimum_out as minimum__out_kernel_impl

__all__ = ["minimum__out_kernel_impl"]
