"""aten::_log_softmax.out, written into out.

Triton kernels and launcher: :mod:`opbench.kernels._lib.softmax`."""

from opbench.kernels._lib.softmax import log_softmax_out as _log_softmax__out_kernel_impl

__all__ = ["_log_softmax__out_kernel_impl"]
