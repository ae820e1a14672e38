"""aten::div_.Tensor, written into self.

Triton kernel and launcher: :mod:`opbench.kernels._lib.arithmetic`."""

from opbench.kernels._lib.arithmetic import div_ as div___Tensor_kernel_impl

__all__ = ["div___Tensor_kernel_impl"]
