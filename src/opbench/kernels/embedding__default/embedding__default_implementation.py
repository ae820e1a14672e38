"""aten::embedding.default: rows of weight gathered by indices of any shape.

Triton kernels and launchers: :mod:`opbench.kernels._lib.embedding`."""

from opbench.kernels._lib.embedding import embedding as embedding__default_kernel_impl

__all__ = ["embedding__default_kernel_impl"]
