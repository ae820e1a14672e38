"""aten::amax: the maximum over dims, NaN-propagating.

Triton kernel and launcher: :mod:`opbench.kernels._lib.reduction`; the entry point:
:mod:`opbench.kernels._lib.reduction_ops`."""

from opbench.kernels._lib.reduction_ops import amax as amax__default_kernel_impl

__all__ = ["amax__default_kernel_impl"]
