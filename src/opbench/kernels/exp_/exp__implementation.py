"""aten::exp_.default, written into self.

Triton kernel and launcher: :mod:`opbench.kernels._lib.pointwise`."""

from opbench.kernels._lib.pointwise import exp_ as exp__kernel_impl

__all__ = ["exp__kernel_impl"]
