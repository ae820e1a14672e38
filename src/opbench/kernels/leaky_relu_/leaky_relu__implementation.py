"""aten::leaky_relu_.default, written into self.

Triton kernel and launcher: :mod:`opbench.kernels._lib.activations`."""

from opbench.kernels._lib.activations import leaky_relu_ as leaky_relu__kernel_impl

__all__ = ["leaky_relu__kernel_impl"]
