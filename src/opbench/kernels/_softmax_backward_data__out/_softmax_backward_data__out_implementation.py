"""aten::_softmax_backward_data.out, written into grad_input.

Triton kernels and launcher: :mod:`opbench.kernels._lib.softmax`."""

from opbench.kernels._lib.softmax import (
    softmax_backward_data_out as _softmax_backward_data__out_kernel_impl,
)

__all__ = ["_softmax_backward_data__out_kernel_impl"]
