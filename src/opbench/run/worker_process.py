"""One worker process seen from the harness: start it, talk to it, watch it, kill it.

A :class:`WorkerProcess` is a separate Python process (``python -m opbench.run.worker``),
optionally inside a sandbox, or a fork of a warm template (:mod:`opbench.run.forkserver`).
It speaks the framed protocol of :mod:`opbench.run.protocol` over its stdin and stdout.
The harness enforces a per-test timeout and a resident-memory limit (not ``RLIMIT_AS``:
CUDA and Triton reserve huge virtual ranges), and turns a dead or killed worker into a
``crash``, ``timeout`` or ``oom`` :class:`Outcome` with what is known (signal, the last
lines of its stderr). Starting spares ahead of need is :mod:`opbench.run.pool`'s.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opbench.run import protocol
from opbench.run.procfs import children, rss_kb
from opbench.run.worker_config import WorkerConfig
from opbench.run.worker_env import worker_env

__all__ = [
    "PIPE_BYTES",
    "RSS_CHECK_INTERVAL_S",
    "Outcome",
    "WorkerProcess",
    "WorkerStartError",
    "widen_pipe",
]

#: How often a worker's resident memory is checked while its answer is awaited.
RSS_CHECK_INTERVAL_S = 0.25
#: The kernel buffer asked for a worker's answer pipe (see :func:`widen_pipe`).
PIPE_BYTES = 1 << 20

log = logging.getLogger(__name__)

#: An outcome's detail where the worker had exited before a test was sent to it (after
#: its last answer): not that test's verdict, the executor sends it to a new worker.
GONE_DETAIL = "the worker had exited before the test was sent"


@dataclass
class Outcome:
    """What came back for one case: a worker message, or how the worker died."""

    kind: str  # result | crash | timeout | oom | gone (exited before the test was sent)
    message: dict[str, Any] | None = None
    detail: str = ""
    stderr_tail: str = ""
    #: a result's message as the worker wrote it, unread (``run_case(raw=True)``: a relay
    #: passes it on and the harness reads it once)
    raw: bytes | None = None


#: How a result that says the kernel broke the worker's CUDA context is reported.
POISONED = "the kernel left the CUDA context unusable ({}); worker replaced"


def poisoned(message: dict[str, Any] | None) -> str | None:
    """What broke the CUDA context, where a worker's answer says so (then the worker is
    killed and the test is its crash); None for a usable worker."""
    return (message or {}).get("poisoned") if isinstance(message, dict) else None


def read_result(data: bytes, stderr_tail: str = "") -> Outcome:
    """A result that crossed unread (``Outcome.raw``: relayed by a Ray actor, or sent to a
    slot's judging process), read as :meth:`WorkerProcess.run_case` reads its own: an
    answer that cannot be read, or says the CUDA context is broken, is the worker's
    ``crash`` (whoever reads it then has that worker killed)."""
    try:
        message = protocol.decode_plain(data)
    except protocol.ProtocolError as e:
        return Outcome("crash", detail=str(e), stderr_tail=stderr_tail)
    broken = poisoned(message)
    if broken:
        return Outcome("crash", detail=POISONED.format(broken), stderr_tail=stderr_tail)
    return Outcome("result", message, stderr_tail=stderr_tail)


class WorkerStartError(RuntimeError):
    """A worker could not start (the backend failed to load, the sandbox failed, ...)."""


class WorkerProcess:
    """One started worker process and the pipes to it."""

    def __init__(
        self,
        config: WorkerConfig,
        device: str,
        log_dir: Path,
        name: str,
        forkserver: Any = None,
    ) -> None:
        from opbench.run import sandbox

        self.name = name
        self.device = device
        self.config = config
        self.stderr_path = log_dir / f"{name}.stderr.log"
        self._stderr = open(self.stderr_path, "ab")
        # bytearray: appending is amortised O(1); ``bytes +=`` copied the whole buffer
        # on every 1 MB read, quadratic in the size of a large test's reply (minutes for
        # a few hundred MB of output copies).
        self._buf = bytearray()
        self.ready_info: dict[str, Any] | None = None
        self.loaded_info: dict[str, Any] | None = None
        self.unit: tuple[str, ...] | None = None
        self.warm_thread: threading.Thread | None = None
        #: whether a spare was asked to import a unit ahead of need (WorkerFactory.preload),
        #: that unit, and what its load answered (None while unknown, or if it could not
        #: load). The flag, not the unit, says "asked": the whole backend's unit is None
        #: (aten), and a second preload of that spare raced the first to load it.
        self.preload_asked = False
        self.preload_unit: tuple[str, ...] | None = None
        self.preload_result: dict[str, Any] | None = None
        self.forked = forkserver is not None
        #: this worker's Triton cache folder, when the harness gives it one (load)
        self.triton_cache: Any = None
        if forkserver is not None:
            # A fork of a warm template (opbench.run.forkserver), already in its sandbox.
            try:
                self.proc = forkserver.spawn(self._stderr.fileno())
            except BaseException:
                self._stderr.close()
                raise
            widen_pipe(self.proc.stdout.fileno())
            self._wrapped = sandbox.Wrapped([], {}, forkserver.sandbox_level)
            self.sandbox_level = forkserver.sandbox_level
            self._host_tmp = forkserver.host_tmp
            protocol.write_trusted(self.proc.stdin, config.message(device))
            return
        cmd = [sys.executable, "-m", "opbench.run.worker"]
        env = worker_env(config, device)
        if device.startswith("cuda") and ":" in device:
            pass  # the worker selects the device itself; keep all GPUs visible for IPC-free setups
        wrapped = sandbox.wrap_command(
            cmd,
            mode=config.sandbox,
            env=env,
            hide=config.hide,
            expose=config.readable(),
            device=device,
        )
        self._wrapped = wrapped
        self.sandbox_level = wrapped.level
        self._host_tmp = wrapped.host_tmp
        self.proc = subprocess.Popen(
            wrapped.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=wrapped.env,
            cwd=wrapped.cwd,
            start_new_session=True,
        )
        widen_pipe(self.proc.stdout.fileno())
        protocol.write_trusted(self.proc.stdin, config.message(device))

    # -- lifecycle -----------------------------------------------------------------
    def _expect(self, kind: str) -> tuple[Outcome, str | None]:
        """Wait for the worker's ``kind`` message (ready, loaded). On anything else the
        worker is killed and the reason returned (its fatal error, or how it died)."""
        out = self._receive(self.config.startup_timeout_s)
        if out.kind == "result" and out.message is not None and out.message.get("type") == kind:
            return out, None
        detail = out.detail
        if out.message and out.message.get("type") == "fatal":
            detail = out.message.get("error", "")
        self.kill()
        return out, detail or out.kind

    def wait_ready(self) -> dict[str, Any]:
        out, failed = self._expect("ready")
        if failed is not None:
            raise WorkerStartError(
                f"worker {self.name} failed to start: {failed}\n{out.stderr_tail}".strip()
            )
        self.ready_info = out.message
        return out.message

    def load(self, unit: tuple[str, ...] | None) -> dict[str, Any]:
        """Have the worker import one isolation unit's code (``None``: the whole backend)
        and return what it said (``load_errors``, ``served``, what it saw at import).

        A worker loads once: it judges that unit only, and is replaced for another.
        """
        if self.loaded_info is not None:
            raise RuntimeError(f"worker {self.name} already judges another unit")
        message: dict[str, Any] = {"type": "load", "unit": list(unit) if unit is not None else None}
        self.triton_cache = self._unit_cache(unit)
        if self.triton_cache is not None:
            message["triton_cache"] = self.triton_cache.worker_path
        try:
            protocol.write_trusted(self.proc.stdin, message)
        except (BrokenPipeError, OSError, ValueError):
            self.kill()
            raise WorkerStartError(f"worker {self.name} died before loading its kernels") from None
        out, failed = self._expect("loaded")
        if failed is not None:
            if out.kind in ("crash", "timeout", "oom") and unit:
                # importing this unit's code killed the worker: that is the unit's failure
                return {
                    "type": "load_failed",
                    "kind": out.kind,
                    "detail": failed,
                    "stderr_tail": out.stderr_tail,
                }
            raise WorkerStartError(
                f"worker {self.name} failed to load the backend: {failed}\n"
                f"{out.stderr_tail}".strip()
            )
        self.unit = unit
        self.loaded_info = out.message
        return out.message

    def _unit_cache(self, unit: tuple[str, ...] | None) -> Any:
        """The unit's kept Triton kernels, seeded into a folder of the worker's ``/tmp``
        (:mod:`opbench.run.triton_cache`): on a GPU, for a backend of kernel files."""
        backend = self.config.backend_path()
        if self.config.backend == "triton":
            from opbench.backends.loader import reference_kernels_folder

            backend = str(reference_kernels_folder())
        if not (self.device.startswith("cuda") and backend):
            return None
        from opbench.run.triton_cache import UnitCache, driver_folder

        cache = UnitCache(backend, unit, self._host_tmp, driver=driver_folder())
        try:
            cache.seed()
        except OSError as e:  # the worker compiles cold
            log.warning("worker %s: no kept Triton kernels (%s)", self.name, e)
        return cache

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                if self.proc.pid <= 0:
                    raise ProcessLookupError
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            log.warning("worker %s did not die after SIGKILL", self.name)
        self._release()

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                protocol.write_trusted(self.proc.stdin, {"type": "stop"})
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired, ValueError):
                pass
        self.kill()

    def retire(self) -> None:
        """Stop a worker whose unit is done without waiting for it: it is killed and
        reaped on a background thread (a graceful stop costs ~50 ms per worker, and a
        run with one unit per operator replaces hundreds of them)."""
        threading.Thread(target=self.kill, name=f"retire-{self.name}", daemon=True).start()

    def _release(self) -> None:
        """After the worker is gone: its pipes, its compiled kernels kept (nothing writes
        to its cache folder now) and its private folders."""
        self._close_pipes()
        if self.triton_cache is not None:
            self.triton_cache.harvest()
            self.triton_cache = None
        self._wrapped.cleanup()

    def _close_pipes(self) -> None:
        for f in (self.proc.stdin, self.proc.stdout, self._stderr):
            try:
                if f:
                    f.close()
            except OSError:
                pass

    # -- one case --------------------------------------------------------------------
    def run_case(
        self,
        case_dict: dict[str, Any],
        timeout_s: float,
        plan: dict[str, Any] | None = None,
        *,
        raw: bool = False,
    ) -> Outcome:
        """Run one test. ``raw``: a result comes back unread in ``Outcome.raw`` (the Ray
        actor relays it; the harness that reads it must check :func:`poisoned`). A worker
        that has already exited answers ``gone`` and is sent nothing: the executor
        replaces it and sends the test again, as it replaces a worker it finds dead."""
        if not self.alive():
            return Outcome("gone", detail=GONE_DETAIL, stderr_tail=self.stderr_tail())
        message = {"type": "case", "case": case_dict, "plan": plan}
        return self._exchange(message, timeout_s, "the test", POISONED, raw=raw)

    def run_program(self, request: dict[str, Any], timeout_s: float) -> Outcome:
        """Send one whole-program request (:mod:`opbench.programs.instrument`) and wait
        for its answer; the worker exits after it (one candidate per process)."""
        return self._exchange(
            {**request, "type": "program"}, timeout_s, "the problem",
            "the candidate left the CUDA context unusable ({})",
        )  # fmt: skip

    def _exchange(self, message: dict[str, Any], timeout_s: float, what: str,
                  poisoned_detail: str, *, raw: bool = False) -> Outcome:  # fmt: skip
        """Send one request and wait for its answer; a worker whose CUDA context the
        candidate broke is killed and its answer reported as a crash."""
        try:
            protocol.write_trusted(self.proc.stdin, message)
        except (BrokenPipeError, OSError, ValueError):
            return self._death(f"worker died before {what} was sent")
        outcome = self._receive(timeout_s, raw=raw)
        broken = poisoned(outcome.message) if outcome.kind == "result" else None
        if broken:
            self.kill()
            return Outcome(
                "crash", detail=poisoned_detail.format(broken), stderr_tail=self.stderr_tail()
            )
        return outcome

    def _receive(self, timeout_s: float, *, raw: bool = False) -> Outcome:
        """Read one framed message, watching the deadline and resident memory; ``raw``:
        a whole message comes back unread (``Outcome.raw``)."""
        deadline = time.monotonic() + timeout_s
        next_rss_check = 0.0
        fd = self.proc.stdout.fileno()
        need: int | None = None
        while True:
            if need is None and len(self._buf) >= protocol.HEADER_SIZE:
                try:
                    need = protocol.frame_length(bytes(self._buf[: protocol.HEADER_SIZE]))
                except protocol.ProtocolError as e:
                    self.kill()
                    return Outcome("crash", detail=str(e), stderr_tail=self.stderr_tail())
            if need is not None and len(self._buf) >= protocol.HEADER_SIZE + need:
                if raw:
                    with memoryview(self._buf) as view:  # one copy, not a slice's and then bytes'
                        data = bytes(view[protocol.HEADER_SIZE : protocol.HEADER_SIZE + need])
                    del self._buf[: protocol.HEADER_SIZE + need]
                    return Outcome("result", raw=data)
                data = memoryview(self._buf)[protocol.HEADER_SIZE : protocol.HEADER_SIZE + need]
                try:
                    message = protocol.decode_plain(data)
                except protocol.ProtocolError as e:
                    self.kill()
                    return Outcome("crash", detail=str(e), stderr_tail=self.stderr_tail())
                finally:
                    data.release()
                del self._buf[: protocol.HEADER_SIZE + need]
                return Outcome("result", message=message)
            now = time.monotonic()
            if now >= deadline:
                self.kill()
                return Outcome(
                    "timeout",
                    detail=f"no answer within {timeout_s:g} s; worker killed",
                    stderr_tail=self.stderr_tail(),
                )
            limit = self.config.memory_limit_mb
            rss = None
            if limit and now >= next_rss_check:
                # walking /proc costs up to milliseconds (every thread of every process
                # in the tree): once per 64 KiB pipe read it added seconds per GiB
                rss = self.rss_mb()
                next_rss_check = now + RSS_CHECK_INTERVAL_S
            if limit and rss is not None and rss > limit:
                self.kill()
                return Outcome(
                    "oom",
                    detail=f"worker resident memory {rss:.0f} MB exceeded the {limit} MB limit",
                    stderr_tail=self.stderr_tail(),
                )
            try:
                ready, _, _ = select.select([fd], [], [], min(0.2, deadline - now))
                chunk = os.read(fd, 8 << 20) if ready else None
            except (OSError, ValueError):  # pipe closed under us (killed by another thread)
                return self._death("worker pipe closed")
            if ready:
                if not chunk:
                    return self._death("worker exited")
                self._buf += chunk

    def _death(self, what: str) -> Outcome:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.proc.returncode
        self._release()
        if code is not None and code > 128 and self.sandbox_level == "bwrap" and not self.forked:
            code = -(code - 128)  # bwrap reports a child killed by signal N as 128 + N
        if code is not None and code < 0:
            try:
                sig = signal.Signals(-code).name
            except ValueError:
                sig = str(-code)
            detail = f"{what}: killed by signal {sig}"
            kind = "oom" if sig == "SIGKILL" and _kernel_oom_killed(self.proc.pid) else "crash"
        else:
            detail = f"{what} with exit code {code}"
            kind = "crash"
        return Outcome(kind, detail=detail, stderr_tail=self.stderr_tail())

    def rss_mb(self) -> float | None:
        """Resident memory of the worker and all its descendants, from /proc, in MB.

        The whole tree counts: under bubblewrap the process we started is ``bwrap``
        and the Python worker is its grandchild.
        """
        total_kb = 0
        seen: set[int] = set()
        stack = [self.proc.pid]
        found = False
        while stack:
            pid = stack.pop()
            if pid in seen:
                continue
            seen.add(pid)
            kb = rss_kb(pid)
            if kb is None:
                continue
            found = True
            total_kb += kb
            stack.extend(children(pid))
        return total_kb / 1024 if found else None

    def stderr_tail(self, lines: int = 15) -> str:
        try:
            with open(self.stderr_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - 8192))
                text = f.read().decode(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def widen_pipe(fd: int, size: int | None = None) -> None:
    """Grow a pipe's kernel buffer (64 KiB by default) towards ``size`` (default
    :data:`PIPE_BYTES`), capped by ``/proc/sys/fs/pipe-max-size``: a program's answer of
    several GiB otherwise crosses in 64 KiB reads. Best effort: where the kernel refuses,
    the pipe stays as it was."""
    setpipe = getattr(fcntl, "F_SETPIPE_SZ", None)
    if setpipe is None:
        return
    size = PIPE_BYTES if size is None else size
    try:
        with open("/proc/sys/fs/pipe-max-size") as f:
            size = min(size, int(f.read()))
    except (OSError, ValueError):
        pass
    with contextlib.suppress(OSError):
        fcntl.fcntl(fd, setpipe, size)


def _kernel_oom_killed(pid: int) -> bool:
    """Best effort: did the kernel's OOM killer take this pid? (Not knowable unprivileged.)"""
    return False
