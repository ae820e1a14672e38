"""aten::pow.Tensor_Scalar: self ** exponent for a Python-number exponent.

Triton kernel and launcher: :mod:`opbench.kernels._lib.math_ops`."""

from opbench.kernels._lib.math_ops import pow_tensor_scalar as pow__Tensor_Scalar_kernel_impl

__all__ = ["pow__Tensor_Scalar_kernel_impl"]
