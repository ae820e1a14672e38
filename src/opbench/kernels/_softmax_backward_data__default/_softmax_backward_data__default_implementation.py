"""aten::_softmax_backward_data: output * (grad - sum(grad * output, dim)).

Triton kernels and launcher: :mod:`opbench.kernels._lib.softmax`."""

from opbench.kernels._lib.softmax import (
    softmax_backward_data as _softmax_backward_data__default_kernel_impl,
)

__all__ = ["_softmax_backward_data__default_kernel_impl"]
