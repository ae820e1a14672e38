"""aten::hardswish.out, written into out.

Triton kernel and launcher: :mod:`opbench.kernels._lib.pointwise`."""

from opbench.kernels._lib.pointwise import hardswish_out as hardswish__out_kernel_impl

__all__ = ["hardswish__out_kernel_impl"]
