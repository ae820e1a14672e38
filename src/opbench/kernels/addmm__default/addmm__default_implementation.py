"""aten::addmm.default: beta * self + alpha * (mat1 @ mat2), the bias added in the epilogue.

Triton kernel and launcher: :mod:`opbench.kernels._lib.matmul`."""

from opbench.kernels._lib.matmul import addmm as addmm__default_kernel_impl

__all__ = ["addmm__default_kernel_impl"]
