"""aten::neg_.default, written into self.

Triton kernel and launcher: :mod:`opbench.kernels._lib.arithmetic`."""

from opbench.kernels._lib.arithmetic import neg_ as neg__kernel_impl

__all__ = ["neg__kernel_impl"]
