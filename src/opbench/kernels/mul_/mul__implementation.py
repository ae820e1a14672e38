"""aten::mul_.Tensor and mul_.Scalar, written into self.

Triton kernel and launcher: :mod:`opbench.kernels._lib.pointwise`."""

from opbench.kernels._lib.pointwise import mul_ as mul__kernel_impl

__all__ = ["mul__kernel_impl"]
