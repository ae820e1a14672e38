"""aten::amax.out, written into out.

Triton kernel and launcher: :mod:`opbench.kernels._lib.reduction`; the entry point:
:mod:`opbench.kernels._lib.reduction_ops`."""

from opbench.kernels._lib.reduction_ops import amax_out as amax__out_kernel_impl

__all__ = ["amax__out_kernel_impl"]
