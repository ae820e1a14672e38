"""The ``aten`` backend: PyTorch's own kernels, the baseline every judge run can check
itself against (a run of ``aten`` against the reference must score 1.0)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opbench.backends.base import Backend
from opbench.spec.ops import OVERLOAD_ALIASES, all_overload_names, canonical_name, get_overload


class AtenBackend(Backend):
    """Serves every existing overload with ``torch.ops.aten.<op>.<overload>``."""

    name = "aten"

    def __init__(self, device: str = "cpu") -> None:
        super().__init__()
        self.device = device

    def kernel_for(self, op: str) -> Callable[..., Any] | None:
        name = canonical_name(op)
        if name not in all_overload_names() and name not in OVERLOAD_ALIASES:
            return None
        try:
            return get_overload(name)
        except AttributeError:
            return None

    def served_ops(self) -> set[str]:
        return set(all_overload_names())

    def coverage_note(self, op: str) -> str | None:
        return "PyTorch's own kernel"
