"""aten::silu_.default, written into self.

Triton kernel and launcher: :mod:`opbench.kernels._lib.activations`."""

from opbench.kernels._lib.activations import silu_ as silu__kernel_impl

__all__ = ["silu__kernel_impl"]
