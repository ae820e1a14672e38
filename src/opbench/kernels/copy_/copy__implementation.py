"""aten::copy_.default, src broadcast and converted into self.

Triton kernels and launchers: :mod:`opbench.kernels._lib.copy`."""

from opbench.kernels._lib.copy import copy_ as copy__kernel_impl

__all__ = ["copy__kernel_impl"]
