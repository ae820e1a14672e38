"""aten::div.Tensor and div.Scalar (true division; rounding modes are declined).

Triton kernel and launcher: :mod:`opbench.kernels._lib.pointwise`."""

from opbench.kernels._lib.pointwise import div as div_kernel_impl

__all__ = ["div_kernel_impl"]
