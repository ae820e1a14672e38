"""aten::gelu_.default, written into self.

Triton kernel and launcher: :mod:`opbench.kernels._lib.activations`."""

from opbench.kernels._lib.activations import gelu_ as gelu__kernel_impl

__all__ = ["gelu__kernel_impl"]
