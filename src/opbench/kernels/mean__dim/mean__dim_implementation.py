"""aten::mean.dim: the mean over dims (None or [] is every dim).

Triton kernel and launcher: :mod:`opbench.kernels._lib.reduction`; the entry point:
:mod:`opbench.kernels._lib.reduction_ops`."""

from opbench.kernels._lib.reduction_ops import mean_dim as mean__dim_kernel_impl

__all__ = ["mean__dim_kernel_impl"]
