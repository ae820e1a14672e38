"""The reference Triton kernels run here on CPU tensors under Triton's interpreter, which
is chosen when a ``@triton.jit`` function is defined: set it before any test module
imports ``opbench.kernels._lib`` (workers do the same, :mod:`opbench.run.worker`).

``OPBENCH_KERNEL_DEVICE=cuda`` runs the same tests compiled on a GPU instead (the
interpreter hides compile errors and the compiled code's layouts): the tests' tensors
go to that device (``kernel_checks.DEVICE``) and eager's TF32 is turned off, so it is the
IEEE float32 baseline the run pins."""

import os

if os.environ.get("OPBENCH_KERNEL_DEVICE", "cpu").startswith("cuda"):
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
else:
    os.environ.setdefault("TRITON_INTERPRET", "1")
