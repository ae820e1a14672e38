"""aten::sub.Tensor and sub.Scalar: self - alpha * other.

Triton kernel and launcher: :mod:`opbench.kernels._lib.pointwise`."""

from opbench.kernels._lib.pointwise import sub as sub_kernel_impl

__all__ = ["sub_kernel_impl"]
