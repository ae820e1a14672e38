"""aten::neg.out, written into out.

Triton kernel and launcher: :mod:`opbench.kernels._lib.arithmetic`."""

from opbench.kernels._lib.arithmetic import neg_out as neg__out_kernel_impl

__all__ = ["neg__out_kernel_impl"]
