"""Is the judged code PyTorch itself? Decided from the run's ``--backend`` spec (and, in
process, from the kernel object), in one place that both the worker and the harness
read, so a worker never imports judging code to learn it."""

from __future__ import annotations

from typing import Any

import torch

__all__ = [
    "CANDIDATE_NAMESPACE",
    "candidate_twin",
    "is_candidate_twin",
    "is_reference_backend",
    "is_reference_kernel",
]

#: The namespace the worker registers a kernel under when it calls it through opbench's
#: C++ gate (:mod:`opbench.instrument.native_calls`): beside ``aten``, so the reference's
#: ``aten`` overload still reaches PyTorch's own kernel in the same process.
CANDIDATE_NAMESPACE = "opbench_candidate"


def is_reference_kernel(kernel: Any, overload: Any) -> bool:
    """True when the kernel is the judged ``OpOverload`` itself (in-process judging of
    PyTorch against itself). Runs decide by the backend (:func:`is_reference_backend`):
    a kernel file may also hand out the overload itself, and that is delegation."""
    return isinstance(kernel, torch._ops.OpOverload) and kernel == overload


def is_reference_backend(spec: str) -> bool:
    """Whether a run's ``--backend`` is PyTorch itself, whose kernels skip the guard."""
    return spec == "aten"


def candidate_twin(op: str) -> str:
    """``add.Tensor`` -> ``opbench_candidate::add.Tensor``: the judged kernel's own
    operator when the worker calls it through the gate."""
    return f"{CANDIDATE_NAMESPACE}::{op}"


def is_candidate_twin(name: str, judged_op: str) -> bool:
    """Whether a recorded call ``name`` is the judged kernel itself, called through the
    gate: ``opbench_candidate::add.Tensor`` or, as the execution observer names it,
    ``opbench_candidate::add``, for ``judged_op`` ``add.Tensor``. Any other operator of
    that namespace is not the judged kernel."""
    prefix = f"{CANDIDATE_NAMESPACE}::"
    if not name.startswith(prefix):
        return False
    rest = name[len(prefix) :]
    judged = judged_op.removeprefix("aten::").removeprefix("aten.")
    base = judged.split(".", 1)[0]
    return rest in (judged, base)
