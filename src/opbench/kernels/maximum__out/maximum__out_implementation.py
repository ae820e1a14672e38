"""aten::maximum.out, written into out.

Triton kernel and launcher: :mod:`opbench.kernels._lib.math_ops`."""

from opbench.kernels._lib.math_ops import maximum_out as maximum__out_kernel_impl

__all__ = ["maximum__out_kernel_impl"]
