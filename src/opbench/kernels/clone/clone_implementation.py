"""aten::clone.default, keeping a dense input's layout (preserve_format).

Triton kernels and launchers: :mod:`opbench.kernels._lib.copy`."""

from opbench.kernels._lib.copy import clone as clone_kernel_impl

__all__ = ["clone_kernel_impl"]
