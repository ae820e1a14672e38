"""aten::masked_fill.Scalar_out, written into out.

Triton kernel and launcher: :mod:`opbench.kernels._lib.math_ops`."""

from opbench.kernels._lib.math_ops import (
    masked_fill_scalar_out as masked_fill__Scalar_out_kernel_impl,
)

__all__ = ["masked_fill__Scalar_out_kernel_impl"]
