"""aten::sum.out: the sum of every element, written into out.

Triton kernel and launcher: :mod:`opbench.kernels._lib.reduction`; the entry point:
:mod:`opbench.kernels._lib.reduction_ops`."""

from opbench.kernels._lib.reduction_ops import sum_out as sum__out_kernel_impl

__all__ = ["sum__out_kernel_impl"]
