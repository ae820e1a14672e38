"""aten::hardtanh_backward.default.

Triton kernel and launcher: :mod:`opbench.kernels._lib.pointwise`."""

from opbench.kernels._lib.pointwise import hardtanh_backward as hardtanh_backward_kernel_impl

__all__ = ["hardtanh_backward_kernel_impl"]
