"""aten::mean.out, written into out.

Triton kernel and launcher: :mod:`opbench.kernels._lib.reduction`; the entry point:
:mod:`opbench.kernels._lib.reduction_ops`."""

from opbench.kernels._lib.reduction_ops import mean_out as mean__out_kernel_impl

__all__ = ["mean__out_kernel_impl"]
