"""aten::elu_backward.default (from self or from the result).

Triton kernel and launcher: :mod:`opbench.kernels._lib.activations`."""

from opbench.kernels._lib.activations import elu_backward as elu_backward_kernel_impl

__all__ = ["elu_backward_kernel_impl"]
