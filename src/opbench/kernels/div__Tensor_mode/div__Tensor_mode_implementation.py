"""aten::div.Tensor_mode: division rounded toward zero or down.

Triton kernel and launcher: :mod:`opbench.kernels._lib.arithmetic`."""

from opbench.kernels._lib.arithmetic import div as div__Tensor_mode_kernel_impl

__all__ = ["div__Tensor_mode_kernel_impl"]
