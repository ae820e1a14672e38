"""aten::div.out_mode, written into out.

Triton kernel and launcher: :mod:`opbench.kernels._lib.arithmetic`."""

from opbench.kernels._lib.arithmetic import div_out as div__out_mode_kernel_impl

__all__ = ["div__out_mode_kernel_impl"]
