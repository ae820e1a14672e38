"""aten::neg.default.

Triton kernel and launcher: :mod:`opbench.kernels._lib.arithmetic`."""

from opbench.kernels._lib.arithmetic import neg as neg_kernel_impl

__all__ = ["neg_kernel_impl"]
