"""aten::clamp.default: min(max(self, min), max) with optional number bounds.

Triton kernel and launcher: :mod:`opbench.kernels._lib.math_ops`."""

from opbench.kernels._lib.math_ops import clamp as clamp__default_kernel_impl

__all__ = ["clamp__default_kernel_impl"]
