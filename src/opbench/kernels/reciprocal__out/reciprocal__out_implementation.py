"""aten::reciprocal.out, written into out.

Triton kernel and launcher: :mod:`opbench.kernels._lib.math_ops`."""

from opbench.kernels._lib.math_ops import reciprocal_out as reciprocal__out_kernel_impl

__all__ = ["reciprocal__out_kernel_impl"]
