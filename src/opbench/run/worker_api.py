"""The seam between an executor and where its workers come from.

:class:`~opbench.run.executor.LocalExecutor` takes workers from a *worker source*: the
local :class:`~opbench.run.pool.WorkerFactory`, Ray's
:class:`~opbench.run.ray_executor.RayWorkerFactory` (each slot's actor holds a factory on
its node), or a test's fake. What it may ask of a source and of a worker is written down
here, and ``tests/run/test_worker_seam.py`` holds the executor's code and every source to
it: a method the executor starts to use (``warm``, 2026-11-28) must exist on each source,
Ray's included, before a run finds out. A leaf: it imports nothing of opbench at run time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from opbench.run.isolation import Unit
    from opbench.run.worker_process import Outcome

__all__ = ["WorkerHandle", "WorkerSource"]


@runtime_checkable
class WorkerHandle(Protocol):
    """One worker process as the executor drives it (local, or inside a Ray actor)."""

    name: str
    sandbox_level: str | None
    unit: Unit
    loaded_info: dict[str, Any] | None
    preload_unit: Unit
    preload_result: dict[str, Any] | None

    def alive(self) -> bool:
        """Whether it may be sent a test (one that exited since answers ``gone``)."""
        ...

    def load(self, unit: Unit) -> dict[str, Any]:
        """Import ``unit``'s kernels: ``loaded`` or ``load_failed`` (with ``kind``)."""
        ...

    def run_case(
        self,
        case_dict: dict[str, Any],
        timeout_s: float,
        plan: dict[str, Any] | None = None,
        *,
        raw: bool = False,
    ) -> Outcome:
        """One test's outcome (``raw``: the answer's bytes unread)."""
        ...

    def kill(self) -> None: ...

    def retire(self) -> None: ...

    def stop(self) -> None: ...


@runtime_checkable
class WorkerSource(Protocol):
    """Where an executor's slots get workers."""

    spares_enabled: bool

    def get(self, device: str, unit: Unit = None) -> WorkerHandle:
        """A ready worker for ``device`` (loaded with ``unit`` where it was preloaded)."""
        ...

    def warm(self, device: str, slots: int = 1) -> None:
        """Start workers for ``slots`` slots of ``device`` ahead, in the background."""
        ...

    def preload(self, device: str, unit: tuple[str, ...]) -> None:
        """Have the next spare import ``unit`` while the current one runs."""
        ...

    def backend_settings(self) -> dict[str, Any] | None:
        """The backend settings workers read at the start and at the end."""
        ...

    def close(self) -> None: ...
