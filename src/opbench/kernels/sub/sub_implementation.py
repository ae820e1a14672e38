"""aten::sub.Tensor and sub.Scalar: self - alpha * other.

Triton kernel and launcher: :mod:`opbench.kernels._lib.arithmetic`."""

from opbench.kernels._lib.arithmetic import sub as sub_kernel_impl

__all__ = ["sub_kernel_impl"]
