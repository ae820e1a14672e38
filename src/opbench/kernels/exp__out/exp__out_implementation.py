"""aten::exp.out, written into out.

Triton kernel and launcher: :mod:`opbench.kernels._lib.math_ops`."""

from opbench.kernels._lib.math_ops import exp_out as exp__out_kernel_impl

__all__ = ["exp__out_kernel_impl"]
