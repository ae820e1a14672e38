"""aten::sqrt.default (integer and bool inputs give the default float dtype).

Triton kernel and launcher: :mod:`opbench.kernels._lib.math_ops`."""

from opbench.kernels._lib.math_ops import sqrt as sqrt_kernel_impl

__all__ = ["sqrt_kernel_impl"]
