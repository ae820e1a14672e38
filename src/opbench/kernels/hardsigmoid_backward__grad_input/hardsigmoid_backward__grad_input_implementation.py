"""aten::hardsigmoid_backward.grad_input, written into grad_input.

Triton kernel and launcher: :mod:`opbench.kernels._lib.activations`."""

from opbench.kernels._lib.activations import (
    hardsigmoid_backward as hardsigmoid_backward__grad_input_kernel_impl,
)

__all__ = ["hardsigmoid_backward__grad_input_kernel_impl"]
