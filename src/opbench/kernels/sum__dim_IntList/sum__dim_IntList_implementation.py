"""aten::sum.dim_IntList: the sum over dims (None or [] is every dim).

Triton kernel and launcher: :mod:`opbench.kernels._lib.reduction`; the entry point:
:mod:`opbench.kernels._lib.reduction_ops`."""

from opbench.kernels._lib.reduction_ops import sum_dim as sum__dim_IntList_kernel_impl

__all__ = ["sum__dim_IntList_kernel_impl"]
