"""aten::div_.Scalar_mode, written into self.

Triton kernel and launcher: :mod:`opbench.kernels._lib.arithmetic`."""

from opbench.kernels._lib.arithmetic import div_ as div___Scalar_mode_kernel_impl

__all__ = ["div___Scalar_mode_kernel_impl"]
