"""aten::add.Tensor and add.Scalar: self + alpha * other.

Triton kernel and launcher: :mod:`opbench.kernels._lib.arithmetic`."""

from opbench.kernels._lib.arithmetic import add as add_kernel_impl

__all__ = ["add_kernel_impl"]
