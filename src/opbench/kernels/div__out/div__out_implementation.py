"""aten::div.out, written into out.

Triton kernel and launcher: :mod:`opbench.kernels._lib.arithmetic`."""

from opbench.kernels._lib.arithmetic import div_out as div__out_kernel_impl

__all__ = ["div__out_kernel_impl"]
