"""aten::reciprocal.default (integer and bool inputs give the default float dtype).

Triton kernel and launcher: :mod:`opbench.kernels._lib.math_ops`."""

from opbench.kernels._lib.math_ops import reciprocal as reciprocal_kernel_impl

__all__ = ["reciprocal_kernel_impl"]
