"""aten::tanh.default.

Triton kernel and launcher: :mod:`opbench.kernels._lib.activations`."""

from opbench.kernels._lib.activations import tanh as tanh_kernel_impl

__all__ = ["tanh_kernel_impl"]
