"""Is the judged code PyTorch itself? Decided from the run's ``--backend`` spec (and, in
process, from the kernel object), in one place that both the worker and the harness
read, so a worker never imports judging code to learn it."""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["is_reference_backend", "is_reference_kernel"]


def is_reference_kernel(kernel: Any, overload: Any) -> bool:
    """True when the kernel is the judged ``OpOverload`` itself (in-process judging of
    PyTorch against itself). Runs decide by the backend (:func:`is_reference_backend`):
    a kernel file may also hand out the overload itself, and that is delegation."""
    return isinstance(kernel, torch._ops.OpOverload) and kernel == overload


def is_reference_backend(spec: str) -> bool:
    """Whether a run's ``--backend`` is PyTorch itself, whose kernels skip the guard."""
    return spec == "aten"
