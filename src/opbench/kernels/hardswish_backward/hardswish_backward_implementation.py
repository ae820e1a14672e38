"""aten::hardswish_backward.default: 0 for x <= -3, grad * (x / 3 + 0.5) below 3, else grad.

Triton kernel and launcher: :mod:`opbench.kernels._lib.activations`."""

from opbench.kernels._lib.activations import hardswish_backward as hardswish_backward_kernel_impl

__all__ = ["hardswish_backward_kernel_impl"]
