"""aten::clamp.out, written into out.

Triton kernel and launcher: :mod:`opbench.kernels._lib.math_ops`."""

from opbench.kernels._lib.math_ops import clamp_out as clamp__out_kernel_impl

__all__ = ["clamp__out_kernel_impl"]
