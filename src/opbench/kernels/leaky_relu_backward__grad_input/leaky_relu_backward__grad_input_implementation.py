"""aten::leaky_relu_backward.grad_input, written into grad_input.

Triton kernel and launcher: :mod:`opbench.kernels._lib.activations`."""

from opbench.kernels._lib.activations import (
    leaky_relu_backward as leaky_relu_backward__grad_input_kernel_impl,
)

__all__ = ["leaky_relu_backward__grad_input_kernel_impl"]
