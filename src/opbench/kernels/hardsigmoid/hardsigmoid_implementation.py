"""aten::hardsigmoid.default: min(max(x + 3, 0), 6) / 6.

Triton kernel and launcher: :mod:`opbench.kernels._lib.pointwise`."""

from opbench.kernels._lib.pointwise import hardsigmoid as hardsigmoid_kernel_impl

__all__ = ["hardsigmoid_kernel_impl"]
