"""aten::sum.IntList_out, written into out.

Triton kernel and launcher: :mod:`opbench.kernels._lib.reduction`."""

from opbench.kernels._lib.reduction import sum_dim_out as sum__IntList_out_kernel_impl

__all__ = ["sum__IntList_out_kernel_impl"]
