"""aten::elu.default: x > 0 ? scale * x : alpha * scale * expm1(input_scale * x).

Triton kernel and launcher: :mod:`opbench.kernels._lib.activations`."""

from opbench.kernels._lib.activations import elu as elu_kernel_impl

__all__ = ["elu_kernel_impl"]
