"""aten::hardsigmoid.out, written into out.

Triton kernel and launcher: :mod:`opbench.kernels._lib.activations`."""

from opbench.kernels._lib.activations import hardsigmoid_out as hardsigmoid__out_kernel_impl

__all__ = ["hardsigmoid__out_kernel_impl"]
