"""aten::tanh.default.

Triton kernel and launcher: :mod:`opbench.kernels._lib.pointwise`."""

from opbench.kernels._lib.pointwise import tanh as tanh_kernel_impl

__all__ = ["tanh_kernel_impl"]
