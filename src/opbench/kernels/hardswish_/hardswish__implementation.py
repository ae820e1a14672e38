"""aten::hardswish_.default, written into self.

Triton kernel and launcher: :mod:`opbench.kernels._lib.pointwise`."""

from opbench.kernels._lib.pointwise import hardswish_ as hardswish__kernel_impl

__all__ = ["hardswish__kernel_impl"]
