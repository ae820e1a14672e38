"""aten::hardsigmoid_.default, written into self.

Triton kernel and launcher: :mod:`opbench.kernels._lib.activations`."""

from opbench.kernels._lib.activations import hardsigmoid_ as hardsigmoid__kernel_impl

__all__ = ["hardsigmoid__kernel_impl"]
