"""aten::bmm.default: a batch of self[i] @ mat2[i].

Triton kernel and launcher: :mod:`opbench.kernels._lib.matmul`."""

from opbench.kernels._lib.matmul import bmm as bmm__default_kernel_impl

__all__ = ["bmm__default_kernel_impl"]
