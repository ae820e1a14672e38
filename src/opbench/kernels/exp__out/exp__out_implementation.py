"""aten::exp.out, written into out.

Triton kernel and launcher: :mod:`opbench.kernels._lib.pointwise`."""

from opbench.kernels._lib.pointwise import exp_out as exp__out_kernel_impl

__all__ = ["exp__out_kernel_impl"]
