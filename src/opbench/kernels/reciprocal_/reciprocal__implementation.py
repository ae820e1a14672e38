"""aten::reciprocal_.default, written into self.

Triton kernel and launcher: :mod:`opbench.kernels._lib.math_ops`."""

from opbench.kernels._lib.math_ops import reciprocal_ as reciprocal__kernel_impl

__all__ = ["reciprocal__kernel_impl"]
