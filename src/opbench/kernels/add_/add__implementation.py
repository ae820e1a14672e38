"""aten::add_.Tensor and add_.Scalar, written into self.

Triton kernel and launcher: :mod:`opbench.kernels._lib.arithmetic`."""

from opbench.kernels._lib.arithmetic import add_ as add__kernel_impl

__all__ = ["add__kernel_impl"]
