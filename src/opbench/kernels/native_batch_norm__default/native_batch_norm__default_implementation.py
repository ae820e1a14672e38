"""aten::native_batch_norm.default: (out, save_mean, save_invstd), training and eval, running stats updated in place.

Triton kernels and launchers: :mod:`opbench.kernels._lib.batch_norm`."""

from opbench.kernels._lib.batch_norm import batch_norm as native_batch_norm__default_kernel_impl

__all__ = ["native_batch_norm__default_kernel_impl"]
