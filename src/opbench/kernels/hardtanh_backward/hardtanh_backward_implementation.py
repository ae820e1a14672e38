"""aten::hardtanh_backward.default.

Triton kernel and launcher: :mod:`opbench.kernels._lib.activations`."""

from opbench.kernels._lib.activations import hardtanh_backward as hardtanh_backward_kernel_impl

__all__ = ["hardtanh_backward_kernel_impl"]
