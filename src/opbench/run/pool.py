"""Worker processes seen from the harness: start, feed, watch, kill, replace.

Each :class:`WorkerProcess` is a separate Python process (``python -m
opbench.run.worker``), optionally inside a sandbox. The harness enforces a per-test
timeout and a resident-memory limit (not ``RLIMIT_AS``: CUDA and Triton reserve huge
virtual ranges), and turns a dead or killed worker into a ``crash``, ``timeout`` or
``oom`` outcome with what is known (signal, the last lines of its stderr). A
:class:`WorkerFactory` keeps one spare worker started and loaded ahead of time, so
replacing a dead worker costs a hand-over, not a torch import.
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
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opbench.run import protocol

#: How often a worker's resident memory is checked while its answer is awaited.
RSS_CHECK_INTERVAL_S = 0.25
#: The kernel buffer asked for a worker's answer pipe (see :func:`widen_pipe`).
PIPE_BYTES = 1 << 20

log = logging.getLogger(__name__)


@dataclass
class WorkerConfig:
    """What every worker of a run is started with (sent as its first message)."""

    backend: str
    device: str
    kernel_version: str | None = None
    perf: bool = False
    judge_options: dict[str, Any] = field(default_factory=dict)
    timing_options: dict[str, Any] = field(default_factory=dict)
    sandbox: str = "off"  # off | auto | required
    #: Fork workers from a warm template process (cheap restarts); off: start each anew.
    fork_server: bool = True
    memory_limit_mb: int | None = None
    startup_timeout_s: float = 300.0
    env: dict[str, str] = field(default_factory=dict)
    #: Folders the sandboxed worker must not see (the run directory with the store).
    hide: list[str] = field(default_factory=list)
    #: Folders beside the kernel directory it may read (the compiled-baseline cache).
    expose: list[str] = field(default_factory=list)
    #: Workers kept started and warm ahead of need, per device. A run with one isolation
    #: unit per operator replaces a worker per operator; on CUDA a fresh worker pays for
    #: a CUDA context (~0.5 s), so two spares hide it behind short tests.
    spare_workers: int = 1
    #: torch intra-op threads per worker (None: torch's default, one per core). Several
    #: processes each with one thread per core oversubscribe the CPU: on 2 x H200 with 32
    #: cores, a second worker made every test's worker time 5x longer.
    threads: int | None = None
    #: Float32 matmuls and convolutions may use TF32 (``--allow-tf32``); off: IEEE.
    allow_tf32: bool = False

    def backend_path(self) -> str | None:
        """The kernel directory as an absolute path, when the backend is one."""
        spec = self.backend
        if spec in ("aten", "triton") or spec.startswith("module:"):
            return None
        p = Path(spec).expanduser()
        return str(p.resolve()) if p.is_dir() else None

    def readable(self) -> list[str]:
        """What a sandboxed worker may read although it lies under /tmp or a hidden
        folder: the kernel directory and ``expose``."""
        kernel_dir = self.backend_path()
        return [*([kernel_dir] if kernel_dir else []), *self.expose]

    def message(self, device: str) -> dict[str, Any]:
        # Absolute: a sandboxed worker starts in its private /tmp, not in our folder.
        return {
            "backend": self.backend_path() or self.backend,
            "device": device,
            "kernel_version": self.kernel_version,
            "perf": self.perf,
            "judge_options": self.judge_options,
            "timing_options": self.timing_options,
            "threads": self.threads,
            "allow_tf32": self.allow_tf32,
        }


@dataclass
class Outcome:
    """What came back for one case: a worker message, or how the worker died."""

    kind: str  # result | crash | timeout | oom
    message: dict[str, Any] | None = None
    detail: str = ""
    stderr_tail: str = ""


class WorkerStartError(RuntimeError):
    """A worker could not start (the backend failed to load, the sandbox failed, ...)."""


def worker_env(config: WorkerConfig, device: str) -> dict[str, str]:
    """The environment of a worker (or of the template workers are forked from).

    On the CPU, Triton kernels run only under Triton's interpreter, which Triton reads
    when its modules are imported and its ``@jit`` functions defined: the worker's own
    warm-up already imports Triton (through torch's profiler), so the variable must be
    in the process's environment from its start (a user's explicit value is kept).
    """
    env = dict(os.environ)
    env.update(config.env)
    env["PYTHONUNBUFFERED"] = "1"
    # the call observer logs a line each time it starts and stops; keep real warnings
    env.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
    if device == "cpu":
        env.setdefault("TRITON_INTERPRET", "1")
    return env


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
        #: the unit a spare was asked to import ahead of need (WorkerFactory.preload),
        #: and what its load answered (None while unknown, or if it could not load)
        self.preload_unit: tuple[str, ...] | None = None
        self.preload_result: dict[str, Any] | None = None
        self.forked = forkserver is not None
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
        try:
            protocol.write_trusted(
                self.proc.stdin, {"type": "load", "unit": list(unit) if unit is not None else None}
            )
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
        self._close_pipes()
        self._wrapped.cleanup()

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

    def _close_pipes(self) -> None:
        for f in (self.proc.stdin, self.proc.stdout, self._stderr):
            try:
                if f:
                    f.close()
            except OSError:
                pass

    # -- one case --------------------------------------------------------------------
    def run_case(
        self, case_dict: dict[str, Any], timeout_s: float, plan: dict[str, Any] | None = None
    ) -> Outcome:
        return self._exchange(
            {"type": "case", "case": case_dict, "plan": plan}, timeout_s, "the test",
            "the kernel left the CUDA context unusable ({}); worker replaced",
        )  # fmt: skip

    def run_program(self, request: dict[str, Any], timeout_s: float) -> Outcome:
        """Send one whole-program request (:mod:`opbench.programs.instrument`) and wait
        for its answer; the worker exits after it (one candidate per process)."""
        return self._exchange(
            {**request, "type": "program"}, timeout_s, "the problem",
            "the candidate left the CUDA context unusable ({})",
        )  # fmt: skip

    def _exchange(self, message: dict[str, Any], timeout_s: float, what: str,
                  poisoned_detail: str) -> Outcome:  # fmt: skip
        """Send one request and wait for its answer; a worker whose CUDA context the
        candidate broke is killed and its answer reported as a crash."""
        try:
            protocol.write_trusted(self.proc.stdin, message)
        except (BrokenPipeError, OSError, ValueError):
            return self._death(f"worker died before {what} was sent")
        outcome = self._receive(timeout_s)
        poisoned = (outcome.message or {}).get("poisoned") if outcome.kind == "result" else None
        if poisoned:
            self.kill()
            return Outcome(
                "crash", detail=poisoned_detail.format(poisoned), stderr_tail=self.stderr_tail()
            )
        return outcome

    def _receive(self, timeout_s: float) -> Outcome:
        """Read one framed message, watching the deadline and resident memory."""
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
        self._close_pipes()
        self._wrapped.cleanup()
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
            kb = _rss_kb(pid)
            if kb is None:
                continue
            found = True
            total_kb += kb
            stack.extend(_children(pid))
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


def _rss_kb(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return 0  # a zombie or kernel thread has no VmRSS line


def _children(pid: int) -> list[int]:
    """Child pids from ``/proc/PID/task/*/children`` (empty where the kernel lacks it)."""
    kids: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return kids
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                kids.extend(int(x) for x in f.read().split())
        except (OSError, ValueError):
            continue
    return kids


def _kernel_oom_killed(pid: int) -> bool:
    """Best effort: did the kernel's OOM killer take this pid? (Not knowable unprivileged.)"""
    return False


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
            name = f"worker-{self._count}"
        return self._spawner.submit(self._start, device, name).result()

    def _start(self, device: str, name: str) -> WorkerProcess:
        """Runs on the spawner thread: fork from the template if possible, else start anew."""
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
            w = queue.popleft() if queue else None
        if w is not None:
            # A published spare's warm-up (or preload) thread has started: wait for it
            # however far it has got. Nothing else changes a spare once it left the queue.
            warm = w.warm_thread
            if warm is not None:
                warm.join()
            stale = w.preload_unit is not None and (
                w.preload_unit != unit or w.preload_result is None
            )
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

    def _start_spare(self, device: str) -> None:
        """Start a spare and its warm-up, and only then publish it to other slots: a
        slot that takes it joins its warm-up thread, which must exist and have started
        (issue #35: publishing first let a slot join a thread not yet started)."""
        limit = max(1, self.config.spare_workers)
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
        finally:
            with self._lock:
                self._starting[device] -= 1
        with self._lock:
            closed = self._closed
            if not closed:
                self._spares.setdefault(device, deque()).append(spare)
        if closed:  # the run ended while this spare started
            spare.kill()

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
            if spare is None or spare.preload_unit is not None:
                return
            spare.preload_unit = unit
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
            spares = [w for q in self._spares.values() for w in q]
            self._spares.clear()
        for w in spares:
            w.kill()
            if w.warm_thread is not None:
                w.warm_thread.join(timeout=10)
        if self._forkserver is not None:
            self._spawner.submit(self._forkserver.close).result()
            self._forkserver = None
        self._spawner.shutdown(wait=False)


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
