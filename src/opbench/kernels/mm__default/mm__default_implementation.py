"""aten::mm.default: self @ mat2 (the out= and dtype overloads go to PyTorch or are derived).

Triton kernel and launcher: :mod:`opbench.kernels._lib.matmul`."""

from opbench.kernels._lib.matmul import mm as mm__default_kernel_impl

__all__ = ["mm__default_kernel_impl"]
