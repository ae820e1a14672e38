"""aten::mul_.Tensor and mul_.Scalar, written into self.

Triton kernel and launcher: :mod:`opbench.kernels._lib.arithmetic`."""

from opbench.kernels._lib.arithmetic import mul_ as mul__kernel_impl

__all__ = ["mul__kernel_impl"]
