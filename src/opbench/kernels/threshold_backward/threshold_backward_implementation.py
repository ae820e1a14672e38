"""aten::threshold_backward.default: self <= threshold ? 0 : grad (relu's backward).

Triton kernel and launcher: :mod:`opbench.kernels._lib.activations`."""

from opbench.kernels._lib.activations import threshold_backward as threshold_backward_kernel_impl

__all__ = ["threshold_backward_kernel_impl"]
