"""aten::mean (the default overload): the mean of every element.

Triton kernel and launcher: :mod:`opbench.kernels._lib.reduction`; the entry point:
:mod:`opbench.kernels._lib.reduction_ops`."""

from opbench.kernels._lib.reduction_ops import mean_default as mean__default_kernel_impl

__all__ = ["mean__default_kernel_impl"]
