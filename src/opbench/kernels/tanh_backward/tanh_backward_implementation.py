"""aten::tanh_backward.default: grad * (1 - y^2).

Triton kernel and launcher: :mod:`opbench.kernels._lib.activations`."""

from opbench.kernels._lib.activations import tanh_backward as tanh_backward_kernel_impl

__all__ = ["tanh_backward_kernel_impl"]
