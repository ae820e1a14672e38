"""aten::hardswish_backward.out, written into out.

Triton kernel and launcher: :mod:`opbench.kernels._lib.activations`."""

from opbench.kernels._lib.activations import (
    hardswish_backward as hardswish_backward__out_kernel_impl,
)

__all__ = ["hardswish_backward__out_kernel_impl"]
