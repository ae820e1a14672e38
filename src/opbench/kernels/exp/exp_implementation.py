"""aten::exp.default (integer and bool inputs give the default float dtype).

Triton kernel and launcher: :mod:`opbench.kernels._lib.math_ops`."""

from opbench.kernels._lib.math_ops import exp as exp_kernel_impl

__all__ = ["exp_kernel_impl"]
