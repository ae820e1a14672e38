"""aten::tanh_backward.default: grad * (1 - y^2).

Triton kernel and launcher: :mod:`opbench.kernels._lib.pointwise`."""

from opbench.kernels._lib.pointwise import tanh_backward as tanh_backward_kernel_impl

__all__ = ["tanh_backward_kernel_impl"]
