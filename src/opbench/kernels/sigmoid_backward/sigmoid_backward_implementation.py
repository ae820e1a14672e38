"""aten::sigmoid_backward.default: grad * (1 - y) * y.

Triton kernel and launcher: :mod:`opbench.kernels._lib.activations`."""

from opbench.kernels._lib.activations import sigmoid_backward as sigmoid_backward_kernel_impl

__all__ = ["sigmoid_backward_kernel_impl"]
