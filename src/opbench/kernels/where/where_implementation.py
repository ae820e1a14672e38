"""aten::where.self and its scalar forms: condition ? self : other.

Triton kernel and launcher: :mod:`opbench.kernels._lib.arithmetic`."""

from opbench.kernels._lib.arithmetic import where as where_kernel_impl

__all__ = ["where_kernel_impl"]
