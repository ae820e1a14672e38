"""The reference Triton kernels run here on CPU tensors under Triton's interpreter, which
is chosen when a ``@triton.jit`` function is defined: set it before any test module
imports ``opbench.kernels._lib`` (workers do the same, :mod:`opbench.run.worker`)."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")
