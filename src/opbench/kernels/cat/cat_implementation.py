"""aten::cat.default, one strided copy per input into its slice of the output.

Triton kernels and launchers: :mod:`opbench.kernels._lib.copy`."""

from opbench.kernels._lib.copy import cat as cat_kernel_impl

__all__ = ["cat_kernel_impl"]
