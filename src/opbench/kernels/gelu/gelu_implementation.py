"""aten::gelu.default, approximate='none' (erf) or 'tanh'.

Triton kernel and launcher: :mod:`opbench.kernels._lib.activations`."""

from opbench.kernels._lib.activations import gelu as gelu_kernel_impl

__all__ = ["gelu_kernel_impl"]
