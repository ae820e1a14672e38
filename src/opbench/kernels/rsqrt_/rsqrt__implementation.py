"""aten::rsqrt_.default, written into self.

Triton kernel and launcher: :mod:`opbench.kernels._lib.math_ops`."""

from opbench.kernels._lib.math_ops import rsqrt_ as rsqrt__kernel_impl

__all__ = ["rsqrt__kernel_impl"]
