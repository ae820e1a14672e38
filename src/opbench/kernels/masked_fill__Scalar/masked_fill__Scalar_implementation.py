"""aten::masked_fill.Scalar: value where the (broadcast) mask is set, else self.

Triton kernel and launcher: :mod:`opbench.kernels._lib.math_ops`."""

from opbench.kernels._lib.math_ops import masked_fill_scalar as masked_fill__Scalar_kernel_impl

__all__ = ["masked_fill__Scalar_kernel_impl"]
