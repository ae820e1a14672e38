"""aten::sigmoid.default.

Triton kernel and launcher: :mod:`opbench.kernels._lib.activations`."""

from opbench.kernels._lib.activations import sigmoid as sigmoid_kernel_impl

__all__ = ["sigmoid_kernel_impl"]
