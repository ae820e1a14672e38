"""aten::hardsigmoid.default: min(max(x + 3, 0), 6) / 6.

Triton kernel and launcher: :mod:`opbench.kernels._lib.activations`."""

from opbench.kernels._lib.activations import hardsigmoid as hardsigmoid_kernel_impl

__all__ = ["hardsigmoid_kernel_impl"]
