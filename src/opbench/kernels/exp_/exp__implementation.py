"""aten::exp_.default, written into self.

Triton kernel and launcher: :mod:`opbench.kernels._lib.math_ops`."""

from opbench.kernels._lib.math_ops import exp_ as exp__kernel_impl

__all__ = ["exp__kernel_impl"]
