"""aten::baddbmm.default: beta * self + alpha * (batch1[i] @ batch2[i]).

Triton kernel and launcher: :mod:`opbench.kernels._lib.matmul`."""

from opbench.kernels._lib.matmul import baddbmm as baddbmm__default_kernel_impl

__all__ = ["baddbmm__default_kernel_impl"]
