"""aten::elu_.default, written into self.

Triton kernel and launcher: :mod:`opbench.kernels._lib.pointwise`."""

from opbench.kernels._lib.pointwise import elu_ as elu__kernel_impl

__all__ = ["elu__kernel_impl"]
