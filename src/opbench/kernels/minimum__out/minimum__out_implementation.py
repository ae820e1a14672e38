"""aten::minimum.out, written into out.

Triton kernel and launcher: :mod:`opbench.kernels._lib.math_ops`."""

from opbench.kernels._lib.math_ops import minimum_out as minimum__out_kernel_impl

__all__ = ["minimum__out_kernel_impl"]
