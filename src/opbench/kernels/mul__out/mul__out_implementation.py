"""aten::mul.out, written into out.

Triton kernel and launcher: :mod:`opbench.kernels._lib.arithmetic`."""

from opbench.kernels._lib.arithmetic import mul_out as mul__out_kernel_impl

__all__ = ["mul__out_kernel_impl"]
