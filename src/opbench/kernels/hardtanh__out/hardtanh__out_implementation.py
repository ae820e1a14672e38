"""aten::hardtanh.out, written into out.

Triton kernel and launcher: :mod:`opbench.kernels._lib.activations`."""

from opbench.kernels._lib.activations import hardtanh_out as hardtanh__out_kernel_impl

__all__ = ["hardtanh__out_kernel_impl"]
