"""aten::amax: the maximum over dims, NaN-propagating.

Triton kernel and launcher: :mod:`opbench.kernels._lib.reduction`."""

from opbench.kernels._lib.reduction import amax as amax__default_kernel_impl

__all__ = ["amax__default_kernel_impl"]
