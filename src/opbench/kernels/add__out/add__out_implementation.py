"""aten::add.out, written into out.

Triton kernel and launcher: :mod:`opbench.kernels._lib.arithmetic`."""

from opbench.kernels._lib.arithmetic import add_out as add__out_kernel_impl

__all__ = ["add__out_kernel_impl"]
