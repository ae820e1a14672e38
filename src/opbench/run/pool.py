"""The worker factory: starts workers and keeps spares warm, so replacing one is cheap.

A :class:`WorkerFactory` starts worker processes
(:class:`~opbench.run.worker_process.WorkerProcess`, forked from a warm template where it
can, :mod:`opbench.run.forkserver`) and keeps ``spare_workers`` of them per device started
and ready ahead of time, so replacing a dead or finished worker costs a hand-over, not a
torch import; it can have the next spare import the next isolation unit while the current
unit's tests run (:meth:`WorkerFactory.preload`). The worker handle, its protocol and
its outcomes live in :mod:`opbench.run.worker_process`, the run's worker settings and
names in :mod:`opbench.run.worker_config`; their names are re-exported here.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from opbench.run.worker_config import WorkerConfig, worker_name
from opbench.run.worker_process import (
    PIPE_BYTES,
    RSS_CHECK_INTERVAL_S,
    Outcome,
    WorkerProcess,
    WorkerStartError,
    widen_pipe,
)

__all__ = [
    "PIPE_BYTES",
    "RSS_CHECK_INTERVAL_S",
    "Outcome",
    "WorkerConfig",
    "WorkerFactory",
    "WorkerProcess",
    "WorkerStartError",
    "widen_pipe",
    "worker_name",
]

log = logging.getLogger(__name__)


class WorkerFactory:
    """Starts workers, keeping one spare started ahead of time per device."""

    def __init__(self, config: WorkerConfig, log_dir: Path, spares: bool = True) -> None:
        self.config = config
        self.log_dir = log_dir
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.spares_enabled = spares
        self._lock = threading.Lock()
        #: Spares other slots may take. Invariant (under ``_lock``): a spare in here has
        #: a ``warm_thread`` that has been started, so whoever takes it can join it; its
        #: ``warm_thread`` and ``preload_unit`` change only under the lock while it is here.
        self._spares: dict[str, deque[WorkerProcess]] = {}
        #: Spares being made (not yet in ``_spares``), per device, so that slots asking at
        #: once do not start more than ``spare_workers``.
        self._starting: dict[str, int] = {}
        #: Told when a spare is published or its start ends (``get`` waits for a spare
        #: being started rather than start a worker of its own behind it).
        self._spare_moved = threading.Condition(self._lock)
        self._waiting: dict[str, int] = {}
        self._closed = False
        self.settings_start: dict[str, Any] | None = None
        self.settings_end: dict[str, Any] | None = None
        self._count = 0
        self.started = 0
        # Workers are started from this one long-lived thread: a sandboxed worker dies
        # with the *thread* that started it (PR_SET_PDEATHSIG), and slot threads end
        # while workers they started (spares handed to other slots) still run.
        self._spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="opbench-spawn")
        self._forkserver: Any = None
        self._fork_failures = 0
        self.forked = 0

    def _new(self, device: str) -> WorkerProcess:
        with self._lock:
            self._count += 1
            self.started += 1
            name = worker_name(device)
        return self._spawner.submit(self._start, device, name).result()

    def _start(self, device: str, name: str) -> WorkerProcess:
        """Runs on the spawner thread: fork from the template if possible, else start anew.
        Once the factory is closed (the run ended or was interrupted) nothing starts: a
        queued spare would otherwise start a new template, and the process's exit waits
        for this thread (a Ctrl-C'd GPU run took 152 s to end)."""
        if self._closed:
            raise WorkerStartError("the worker factory is closed")
        server = self._template(device)
        if server is not None:
            from opbench.run.forkserver import ForkServerError

            try:
                w = WorkerProcess(self.config, device, self.log_dir, name, forkserver=server)
                self.forked += 1
                return w
            except (ForkServerError, OSError) as e:
                log.warning("fork server failed (%s); starting workers as new processes", e)
                self._drop_template()
        return WorkerProcess(self.config, device, self.log_dir, name)

    def _template(self, device: str) -> Any:
        use = self.config.fork_server and os.environ.get("OPBENCH_FORK_SERVER", "1") != "0"
        if not use or self._fork_failures >= 2:
            return None
        if self._forkserver is not None and not self._forkserver.alive():
            self._drop_template()
        if self._forkserver is None and self._fork_failures < 2:
            from opbench.run.forkserver import ForkServer, ForkServerError

            try:
                self._forkserver = ForkServer(self.config, self.log_dir, device)
            except (ForkServerError, OSError) as e:
                log.warning("fork server could not start (%s); workers start anew", e)
                self._fork_failures += 1
        return self._forkserver

    def _drop_template(self) -> None:
        self._fork_failures += 1
        if self._forkserver is not None:
            self._forkserver.close()
            self._forkserver = None

    def get(self, device: str, unit: tuple[str, ...] | None = None) -> WorkerProcess:
        """A ready worker for ``device``: the spare if there is one, else a new one. A
        spare that imported another unit ahead of need is discarded (a worker judges one
        unit only); one that imported ``unit`` comes back loaded."""
        with self._lock:
            queue = self._spares.get(device)
            # a spare on its way that no other slot waits for yet (warm): take it
            while (
                not queue
                and not self._closed
                and self._starting.get(device, 0) > self._waiting.get(device, 0)
            ):
                self._waiting[device] = self._waiting.get(device, 0) + 1
                try:
                    self._spare_moved.wait()
                finally:
                    self._waiting[device] -= 1
                queue = self._spares.get(device)
            w = queue.popleft() if queue else None
        if w is not None:
            # A published spare's warm-up (or preload) thread has started: wait for it
            # however far it has got. Nothing else changes a spare once it left the queue.
            warm = w.warm_thread
            if warm is not None:
                warm.join()
            stale = w.preload_asked and (w.preload_unit != unit or w.preload_result is None)
            if w.ready_info is None or not w.alive() or stale:
                w.kill()
                w = None
        if w is None:
            w = self._new(device)
            w.wait_ready()
        self._note_settings(w.ready_info)
        if self.spares_enabled:
            for _ in range(max(1, self.config.spare_workers)):
                try:
                    self._start_spare(device)
                except (WorkerStartError, OSError, RuntimeError) as e:
                    # the caller has its worker; a missing spare costs a later start only
                    log.warning("could not start a spare worker: %s", e)
                    break
        return w

    def _note_settings(self, ready: dict[str, Any] | None) -> None:
        """Keep the backend settings the first and the latest worker handed out read
        back after pinning them (the run's record, ``env.backend_settings``)."""
        found = (ready or {}).get("settings")
        if found is None:
            return
        with self._lock:
            if self.settings_start is None:
                self.settings_start = found
            self.settings_end = found

    def backend_settings(self) -> dict[str, Any] | None:
        if self.settings_start is None:
            return None
        return {"start": self.settings_start, "end": self.settings_end}

    def _start_spare(self, device: str, limit: int | None = None) -> None:
        """Start a spare and its warm-up, and only then publish it to other slots: a
        slot that takes it joins its warm-up thread, which must exist and have started
        (issue #35: publishing first let a slot join a thread not yet started).
        ``limit``: spares of ``device`` kept or starting, at most (the config's
        ``spare_workers`` if None)."""
        limit = max(1, limit if limit is not None else self.config.spare_workers)
        with self._lock:
            if self._closed:
                return
            if len(self._spares.get(device) or ()) + self._starting.get(device, 0) >= limit:
                return
            self._starting[device] = self._starting.get(device, 0) + 1
        try:
            spare = self._new(device)
            spare.warm_thread = threading.Thread(
                target=_warm, args=(spare,), name=f"warm-{spare.name}", daemon=True
            )
            try:
                spare.warm_thread.start()
            except BaseException:
                spare.kill()
                raise
        except BaseException:
            with self._lock:
                self._starting[device] -= 1
                self._spare_moved.notify_all()
            raise
        with self._lock:
            self._starting[device] -= 1
            closed = self._closed
            if not closed:
                self._spares.setdefault(device, deque()).append(spare)
            self._spare_moved.notify_all()
        if closed:  # the run ended while this spare started
            spare.kill()

    def warm(self, device: str, slots: int = 1) -> None:
        """Start a spare for each of ``device``'s ``slots`` now, in the background: the
        fork server's template (imports, the OpInfo database) and the workers' start then
        overlap the judging process's start and the first plan instead of following them
        (on 4 x H100 the first result came 27 s after the run's start, 2026-11-28). A
        slot's first :meth:`get` waits for one of them. One that cannot start is the
        first get's to report (it starts a worker of its own)."""
        if not self.spares_enabled:
            return
        limit = max(slots, self.config.spare_workers)

        def start() -> None:
            try:
                self._start_spare(device, limit)
            except (WorkerStartError, OSError, RuntimeError) as e:
                log.warning("could not warm a worker on %s: %s", device, e)

        for i in range(slots):  # each counts as starting at once; the spawner orders them
            threading.Thread(target=start, name=f"opbench-warm-{device}-{i}", daemon=True).start()

    def preload(self, device: str, unit: tuple[str, ...]) -> None:
        """Have the next spare import ``unit`` now, while the current unit's tests run
        (runs without timing only: the import would share the machine with measured
        calls). Its own process, sandbox and import observer, as for any load.

        The spare stays in the queue meanwhile, so the loader thread is started before
        it replaces the spare's ``warm_thread``, all under the lock: a slot that takes
        the spare then waits for the load instead of racing it for the worker's pipes.
        """
        with self._lock:
            queue = self._spares.get(device)
            spare = queue[0] if queue else None
            if spare is None or spare.preload_asked:
                return
            spare.preload_asked, spare.preload_unit = True, unit
            loader = threading.Thread(
                target=_preload,
                args=(spare, unit, spare.warm_thread),
                name=f"preload-{spare.name}",
                daemon=True,
            )
            loader.start()
            spare.warm_thread = loader

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._spare_moved.notify_all()
            spares = [w for q in self._spares.values() for w in q]
            self._spares.clear()
        for w in spares:
            w.kill()
            if w.warm_thread is not None:
                w.warm_thread.join(timeout=10)
        if self._forkserver is not None:
            self._spawner.submit(self._forkserver.close).result()
            self._forkserver = None
        self._spawner.shutdown(wait=False, cancel_futures=True)


def _warm(spare: WorkerProcess) -> None:
    """A spare's warm-up thread: wait until the worker says it is ready. A spare that
    fails to start is left unready; the slot that takes it starts a new worker."""
    try:
        spare.wait_ready()
    except WorkerStartError as e:
        log.debug("spare worker failed to start: %s", e)


def _preload(
    spare: WorkerProcess, unit: tuple[str, ...], previous: threading.Thread | None
) -> None:
    """A spare's preload thread: after its warm-up (``previous``), import ``unit``."""
    if previous is not None:
        previous.join()
    if spare.ready_info is None or not spare.alive():
        return
    try:
        spare.preload_result = spare.load(unit)
    except WorkerStartError as e:
        log.debug("spare worker failed to preload %s: %s", unit, e)
        spare.kill()
