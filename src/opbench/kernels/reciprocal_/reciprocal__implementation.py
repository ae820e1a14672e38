"""aten::reciprocal_.default, written into self.

Triton kernel and launcher: :mod:`opbench.kernels._lib.pointwise`."""

from opbench.kernels._lib.pointwise import reciprocal_ as reciprocal__kernel_impl

__all__ = ["reciprocal__kernel_impl"]
