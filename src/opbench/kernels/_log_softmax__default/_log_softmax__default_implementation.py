"""aten::_log_softmax: log-softmax over one dim (half_to_float: f16 in, f32 out).

Triton kernels and launcher: :mod:`opbench.kernels._lib.softmax`."""

from opbench.kernels._lib.softmax import log_softmax as _log_softmax__default_kernel_impl

__all__ = ["_log_softmax__default_kernel_impl"]
