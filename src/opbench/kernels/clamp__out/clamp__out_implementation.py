"""aten::clamp.out, written into out.

Triton kernel and launcher: :mod:`opbench.kernels._lib.pointwise`."""

from opbench.kernels._lib.pointwise import clamp_out as clamp__out_kernel_impl

__all__ = ["clamp__out_kernel_impl"]
