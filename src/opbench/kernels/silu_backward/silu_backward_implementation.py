"""aten::silu_backward.default.

Triton kernel and launcher: :mod:`opbench.kernels._lib.activations`."""

from opbench.kernels._lib.activations import silu_backward as silu_backward_kernel_impl

__all__ = ["silu_backward_kernel_impl"]
