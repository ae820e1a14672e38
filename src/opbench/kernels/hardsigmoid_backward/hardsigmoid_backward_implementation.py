"""aten::hardsigmoid_backward.default: grad / 6 where -3 < self < 3, else 0.

Triton kernel and launcher: :mod:`opbench.kernels._lib.activations`."""

from opbench.kernels._lib.activations import (
    hardsigmoid_backward as hardsigmoid_backward_kernel_impl,
)

__all__ = ["hardsigmoid_backward_kernel_impl"]
