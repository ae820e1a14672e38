"""aten::clamp_.default, written into self.

Triton kernel and launcher: :mod:`opbench.kernels._lib.math_ops`."""

from opbench.kernels._lib.math_ops import clamp_ as clamp___default_kernel_impl

__all__ = ["clamp___default_kernel_impl"]
