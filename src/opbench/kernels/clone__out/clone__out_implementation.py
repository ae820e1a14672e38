"""aten::clone.out.

Triton kernels and launchers: :mod:`opbench.kernels._lib.copy`."""

from opbench.kernels._lib.copy import clone_out as clone__out_kernel_impl

__all__ = ["clone__out_kernel_impl"]
