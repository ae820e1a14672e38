"""aten::_log_softmax_backward_data: grad - exp(output) * sum(grad, dim).

Triton kernels and launcher: :mod:`opbench.kernels._lib.softmax`."""

from opbench.kernels._lib.softmax import (
    log_softmax_backward_data as _log_softmax_backward_data__default_kernel_impl,
)

__all__ = ["_log_softmax_backward_data__default_kernel_impl"]
