"""What a backend is: :class:`Backend` (a set of kernels for ATen overloads) and
:class:`BackendError`. A leaf: every kind of backend (:mod:`~opbench.backends.aten`,
:mod:`~opbench.backends.directory`, :mod:`~opbench.backends.module`), the registry and
the loader build on it, and it imports none of them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["Backend", "BackendError"]


class BackendError(RuntimeError):
    """A backend spec that cannot be loaded; the message is one actionable line."""


class Backend:
    """A set of kernels for ATen overloads.

    ``kernel_for(op)`` gives a callable taking ATen-style arguments (``op`` written
    ``add.Tensor``, ``add_.Tensor``, ``add.out``); in-place and ``out=`` kernels write into
    ``self`` / ``out`` and return it. A kernel declines a case by raising
    ``NotImplementedError``.
    """

    name: str = "backend"
    device: str = "cpu"

    def __init__(self) -> None:
        #: folder or op -> "file: reason", for everything that failed to load.
        self.load_errors: dict[str, str] = {}

    def kernel_for(self, op: str) -> Callable[..., Any] | None:
        raise NotImplementedError

    def served_ops(self) -> set[str]:
        raise NotImplementedError

    def coverage_note(self, op: str) -> str | None:
        """Where the kernel for ``op`` comes from (file, derived variant), if known."""
        return None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} device={self.device!r} ops={len(self.served_ops())}>"
