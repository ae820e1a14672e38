"""aten::gelu.out, written into out.

Triton kernel and launcher: :mod:`opbench.kernels._lib.activations`."""

from opbench.kernels._lib.activations import gelu_out as gelu__out_kernel_impl

__all__ = ["gelu__out_kernel_impl"]
