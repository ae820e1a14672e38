"""aten::sub.out, written into out.

Triton kernel and launcher: :mod:`opbench.kernels._lib.arithmetic`."""

from opbench.kernels._lib.arithmetic import sub_out as sub__out_kernel_impl

__all__ = ["sub__out_kernel_impl"]
