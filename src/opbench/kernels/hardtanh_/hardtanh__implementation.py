"""aten::hardtanh_.default, written into self.

Triton kernel and launcher: :mod:`opbench.kernels._lib.pointwise`."""

from opbench.kernels._lib.pointwise import hardtanh_ as hardtanh__kernel_impl

__all__ = ["hardtanh__kernel_impl"]
