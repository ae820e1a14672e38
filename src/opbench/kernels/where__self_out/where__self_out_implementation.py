"""aten::where.self_out, written into out.

Triton kernel and launcher: :mod:`opbench.kernels._lib.arithmetic`."""

from opbench.kernels._lib.arithmetic import where_out as where__self_out_kernel_impl

__all__ = ["where__self_out_kernel_impl"]
