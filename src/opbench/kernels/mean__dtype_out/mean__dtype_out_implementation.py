"""aten::mean.dtype_out: the mean of every element, written into out.

Triton kernel and launcher: :mod:`opbench.kernels._lib.reduction`; the entry point:
:mod:`opbench.kernels._lib.reduction_ops`."""

from opbench.kernels._lib.reduction_ops import mean_dtype_out as mean__dtype_out_kernel_impl

__all__ = ["mean__dtype_out_kernel_impl"]
