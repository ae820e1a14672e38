"""aten::pow.Tensor_Scalar_out, written into out.

Triton kernel and launcher: :mod:`opbench.kernels._lib.math_ops`."""

from opbench.kernels._lib.math_ops import (
    pow_tensor_scalar_out as pow__Tensor_Scalar_out_kernel_impl,
)

__all__ = ["pow__Tensor_Scalar_out_kernel_impl"]
