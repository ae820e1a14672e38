"""aten::amax.out, written into out.

Triton kernel and launcher: :mod:`opbench.kernels._lib.reduction`."""

from opbench.kernels._lib.reduction import amax_out as amax__out_kernel_impl

__all__ = ["amax__out_kernel_impl"]
