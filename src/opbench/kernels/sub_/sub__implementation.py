"""aten::sub_.Tensor and sub_.Scalar, written into self.

Triton kernel and launcher: :mod:`opbench.kernels._lib.arithmetic`."""

from opbench.kernels._lib.arithmetic import sub_ as sub__kernel_impl

__all__ = ["sub__kernel_impl"]
