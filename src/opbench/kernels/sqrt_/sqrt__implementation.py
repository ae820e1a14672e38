"""aten::sqrt_.default, written into self.

Triton kernel and launcher: :mod:`opbench.kernels._lib.math_ops`."""

from opbench.kernels._lib.math_ops import sqrt_ as sqrt__kernel_impl

__all__ = ["sqrt__kernel_impl"]
