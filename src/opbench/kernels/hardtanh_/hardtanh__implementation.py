"""aten::hardtanh_.default, written into self.

Triton kernel and launcher: :mod:`opbench.kernels._lib.activations`."""

from opbench.kernels._lib.activations import hardtanh_ as hardtanh__kernel_impl

__all__ = ["hardtanh__kernel_impl"]
