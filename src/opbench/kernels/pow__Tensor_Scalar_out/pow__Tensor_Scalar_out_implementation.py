"""aten::pow.Tensor_Scalar_out, written into out.

Triton kernel and launcher: :mod:`opbench.kernels._lib.pointwise`."""

from opbench.kernels._lib.pointwise import (
    pow_tensor_scalar_out as pow__Tensor_Scalar_out_kernel_impl,
)

__all__ = ["pow__Tensor_Scalar_out_kernel_impl"]
