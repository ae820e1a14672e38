"""aten::rsub.Tensor and rsub.Scalar: other - alpha * self.

Triton kernel and launcher: :mod:`opbench.kernels._lib.arithmetic`."""

from opbench.kernels._lib.arithmetic import rsub as rsub_kernel_impl

__all__ = ["rsub_kernel_impl"]
