"""aten::rsqrt.out, written into out.

Triton kernel and launcher: :mod:`opbench.kernels._lib.math_ops`."""

from opbench.kernels._lib.math_ops import rsqrt_out as rsqrt__out_kernel_impl

__all__ = ["rsqrt__out_kernel_impl"]
