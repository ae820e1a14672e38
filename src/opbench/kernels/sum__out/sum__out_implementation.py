"""aten::sum.out: the sum of every element, written into out.

Triton kernel and launcher: :mod:`opbench.kernels._lib.reduction`."""

from opbench.kernels._lib.reduction import sum_out as sum__out_kernel_impl

__all__ = ["sum__out_kernel_impl"]
