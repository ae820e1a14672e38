"""aten::_softmax: softmax over one dim (half_to_float: f16 in, f32 out).

Triton kernels and launcher: :mod:`opbench.kernels._lib.softmax`."""

from opbench.kernels._lib.softmax import softmax as _softmax__default_kernel_impl

__all__ = ["_softmax__default_kernel_impl"]
