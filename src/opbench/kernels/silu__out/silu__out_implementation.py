"""aten::silu.out, written into out.

Triton kernel and launcher: :mod:`opbench.kernels._lib.activations`."""

from opbench.kernels._lib.activations import silu_out as silu__out_kernel_impl

__all__ = ["silu__out_kernel_impl"]
