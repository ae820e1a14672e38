"""aten::hardtanh.out, written into out.

Triton kernel and launcher: :mod:`opbench.kernels._lib.pointwise`."""

from opbench.kernels._lib.pointwise import hardtanh_out as hardtanh__out_kernel_impl

__all__ = ["hardtanh__out_kernel_impl"]
