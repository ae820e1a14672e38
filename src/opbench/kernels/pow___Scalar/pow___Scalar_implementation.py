"""aten::pow_.Scalar, written into self.

Triton kernel and launcher: :mod:`opbench.kernels._lib.math_ops`."""

from opbench.kernels._lib.math_ops import pow_scalar_ as pow___Scalar_kernel_impl

__all__ = ["pow___Scalar_kernel_impl"]
