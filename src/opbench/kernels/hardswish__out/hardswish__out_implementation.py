"""aten::hardswish.out, written into out.

Triton kernel and launcher: :mod:`opbench.kernels._lib.activations`."""

from opbench.kernels._lib.activations import hardswish_out as hardswish__out_kernel_impl

__all__ = ["hardswish__out_kernel_impl"]
