"""aten::embedding_dense_backward.default: grad_output rows scatter-added into a num_weights x D gradient (float32 atomics).

Triton kernels and launchers: :mod:`opbench.kernels._lib.embedding`."""

from opbench.kernels._lib.embedding import (
    embedding_dense_backward as embedding_dense_backward__default_kernel_impl,
)

__all__ = ["embedding_dense_backward__default_kernel_impl"]
