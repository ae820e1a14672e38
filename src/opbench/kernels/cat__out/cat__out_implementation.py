"""aten::cat.out.

Triton kernels and launchers: :mod:`opbench.kernels._lib.copy`."""

from opbench.kernels._lib.copy import cat_out as cat__out_kernel_impl

__all__ = ["cat__out_kernel_impl"]
