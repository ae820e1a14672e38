"""aten::gelu_.default, written into self.

Triton kernel and launcher: :mod:`opbench.kernels._lib.pointwise`."""

from opbench.kernels._lib.pointwise import gelu_ as gelu__kernel_impl

__all__ = ["gelu__kernel_impl"]
