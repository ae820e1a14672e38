"""aten::elu_.default, written into self.

Triton kernel and launcher: :mod:`opbench.kernels._lib.activations`."""

from opbench.kernels._lib.activations import elu_ as elu__kernel_impl

__all__ = ["elu__kernel_impl"]
