"""aten::relu_.default, written into self.

Triton kernel and launcher: :mod:`opbench.kernels._lib.activations`."""

from opbench.kernels._lib.activations import relu_ as relu__kernel_impl

__all__ = ["relu__kernel_impl"]
