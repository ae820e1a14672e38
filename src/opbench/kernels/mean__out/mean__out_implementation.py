"""aten::mean.out, written into out.

Triton kernel and launcher: :mod:`opbench.kernels._lib.reduction`."""

from opbench.kernels._lib.reduction import mean_out as mean__out_kernel_impl

__all__ = ["mean__out_kernel_impl"]
