"""aten::silu.default: x * sigmoid(x).

Triton kernel and launcher: :mod:`opbench.kernels._lib.activations`."""

from opbench.kernels._lib.activations import silu as silu_kernel_impl

__all__ = ["silu_kernel_impl"]
