"""aten::div.Scalar (true division).

Triton kernel and launcher: :mod:`opbench.kernels._lib.arithmetic`."""

from opbench.kernels._lib.arithmetic import div as div__Scalar_kernel_impl

__all__ = ["div__Scalar_kernel_impl"]
