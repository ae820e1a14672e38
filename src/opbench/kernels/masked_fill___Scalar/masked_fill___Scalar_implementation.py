"""aten::masked_fill_.Scalar, written into self.

Triton kernel and launcher: :mod:`opbench.kernels._lib.math_ops`."""

from opbench.kernels._lib.math_ops import masked_fill_scalar_ as masked_fill___Scalar_kernel_impl

__all__ = ["masked_fill___Scalar_kernel_impl"]
