"""aten::mean.dim: the mean over dims (None or [] is every dim).

Triton kernel and launcher: :mod:`opbench.kernels._lib.reduction`."""

from opbench.kernels._lib.reduction import mean_dim as mean__dim_kernel_impl

__all__ = ["mean__dim_kernel_impl"]
