"""aten::sum.IntList_out, written into out.

Triton kernel and launcher: :mod:`opbench.kernels._lib.reduction`; the entry point:
:mod:`opbench.kernels._lib.reduction_ops`."""

from opbench.kernels._lib.reduction_ops import sum_dim_out as sum__IntList_out_kernel_impl

__all__ = ["sum__IntList_out_kernel_impl"]
