"""aten::native_batch_norm_backward.default: (grad_input, grad_weight, grad_bias), None where output_mask is False.

Triton kernels and launchers: :mod:`opbench.kernels._lib.batch_norm_backward`."""

from opbench.kernels._lib.batch_norm_backward import (
    batch_norm_backward as native_batch_norm_backward__default_kernel_impl,
)

__all__ = ["native_batch_norm_backward__default_kernel_impl"]
