"""aten::tanh.out, written into out.

Triton kernel and launcher: :mod:`opbench.kernels._lib.activations`."""

from opbench.kernels._lib.activations import tanh_out as tanh__out_kernel_impl

__all__ = ["tanh__out_kernel_impl"]
