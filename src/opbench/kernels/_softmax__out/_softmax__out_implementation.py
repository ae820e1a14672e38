"""aten::_softmax.out, written into out.

Triton kernels and launcher: :mod:`opbench.kernels._lib.softmax`."""

from opbench.kernels._lib.softmax import softmax_out as _softmax__out_kernel_impl

__all__ = ["_softmax__out_kernel_impl"]
