"""aten::rsqrt.out, written into out.

Triton kernel and launcher: :mod:`opbench.kernels._lib.pointwise`."""

from opbench.kernels._lib.pointwise import rsqrt_out as rsqrt__out_kernel_impl

__all__ = ["rsqrt__out_kernel_impl"]
