"""aten::sqrt.out, written into out.

Triton kernel and launcher: :mod:`opbench.kernels._lib.math_ops`."""

from opbench.kernels._lib.math_ops import sqrt_out as sqrt__out_kernel_impl

__all__ = ["sqrt__out_kernel_impl"]
