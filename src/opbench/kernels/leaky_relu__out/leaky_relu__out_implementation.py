"""aten::leaky_relu.out, written into out.

Triton kernel and launcher: :mod:`opbench.kernels._lib.activations`."""

from opbench.kernels._lib.activations import leaky_relu_out as leaky_relu__out_kernel_impl

__all__ = ["leaky_relu__out_kernel_impl"]
