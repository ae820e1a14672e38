"""aten::mul.Tensor and mul.Scalar.

Triton kernel and launcher: :mod:`opbench.kernels._lib.arithmetic`."""

from opbench.kernels._lib.arithmetic import mul as mul_kernel_impl

__all__ = ["mul_kernel_impl"]
