"""aten::elu.out, written into out.

Triton kernel and launcher: :mod:`opbench.kernels._lib.activations`."""

from opbench.kernels._lib.activations import elu_out as elu__out_kernel_impl

__all__ = ["elu__out_kernel_impl"]
