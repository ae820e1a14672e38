"""aten::convolution_backward.default: the input gradient by the forward kernel run the
other way, the weight gradient by its own implicit GEMM, the bias gradient a reduction.

Triton kernels and launchers: :mod:`opbench.kernels._lib.conv_backward` (and the forward's,
:mod:`opbench.kernels._lib.conv`)."""

from opbench.kernels._lib.conv_backward import (
    convolution_backward as convolution_backward__default_kernel_impl,
)

__all__ = ["convolution_backward__default_kernel_impl"]
