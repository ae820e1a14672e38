"""aten::where.self_out, written into out.

Triton kernel and launcher: :mod:`opbench.kernels._lib.pointwise`."""

from opbench.kernels._lib.pointwise import where_out as where__self_out_kernel_impl

__all__ = ["where__self_out_kernel_impl"]
