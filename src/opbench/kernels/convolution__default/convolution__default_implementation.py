"""aten::convolution.default (forward): an implicit GEMM, 1-3-D, strided, padded, dilated,
grouped and transposed.

Triton kernel and launcher: :mod:`opbench.kernels._lib.conv`."""

from opbench.kernels._lib.conv import convolution as convolution__default_kernel_impl

__all__ = ["convolution__default_kernel_impl"]
