"""aten::sum (the default overload): the sum of every element.

Triton kernel and launcher: :mod:`opbench.kernels._lib.reduction`; the entry point:
:mod:`opbench.kernels._lib.reduction_ops`."""

from opbench.kernels._lib.reduction_ops import sum_default as sum__default_kernel_impl

__all__ = ["sum__default_kernel_impl"]
