"""aten::sigmoid_.default, written into self.

Triton kernel and launcher: :mod:`opbench.kernels._lib.activations`."""

from opbench.kernels._lib.activations import sigmoid_ as sigmoid__kernel_impl

__all__ = ["sigmoid__kernel_impl"]
