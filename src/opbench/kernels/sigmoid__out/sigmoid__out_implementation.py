"""aten::sigmoid.out, written into out.

Triton kernel and launcher: :mod:`opbench.kernels._lib.activations`."""

from opbench.kernels._lib.activations import sigmoid_out as sigmoid__out_kernel_impl

__all__ = ["sigmoid__out_kernel_impl"]
