"""aten::tanh_.default, written into self.

Triton kernel and launcher: :mod:`opbench.kernels._lib.activations`."""

from opbench.kernels._lib.activations import tanh_ as tanh__kernel_impl

__all__ = ["tanh__kernel_impl"]
