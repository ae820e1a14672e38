"""aten::hardtanh.default: clamp(x, min_val, max_val).

Triton kernel and launcher: :mod:`opbench.kernels._lib.activations`."""

from opbench.kernels._lib.activations import hardtanh as hardtanh_kernel_impl

__all__ = ["hardtanh_kernel_impl"]
