"""aten::hardswish.default: x * min(max(x + 3, 0), 6) / 6.

Triton kernel and launcher: :mod:`opbench.kernels._lib.activations`."""

from opbench.kernels._lib.activations import hardswish as hardswish_kernel_impl

__all__ = ["hardswish_kernel_impl"]
