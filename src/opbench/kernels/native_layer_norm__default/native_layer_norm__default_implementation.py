"""aten::native_layer_norm.default: (out, mean, rstd), mean/rstd shaped input.shape[:axis] + [1] * len(normalized_shape).

Triton kernels and launchers: :mod:`opbench.kernels._lib.norm`."""

from opbench.kernels._lib.norm import layer_norm as native_layer_norm__default_kernel_impl

__all__ = ["native_layer_norm__default_kernel_impl"]
