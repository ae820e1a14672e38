"""aten::hardswish_.default, written into self.

Triton kernel and launcher: :mod:`opbench.kernels._lib.activations`."""

from opbench.kernels._lib.activations import hardswish_ as hardswish__kernel_impl

__all__ = ["hardswish__kernel_impl"]
