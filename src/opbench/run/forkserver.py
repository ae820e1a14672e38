"""A fork server for workers: replacing a dead worker costs a ``fork``, not a torch import.

Starting a worker means starting Python, importing torch and the judge and warming up
(2-5 s on a small CPU machine, more under load). A kernel that crashes on every test
would pay that for each test. Instead one *template* process per run (inside the same
sandbox a worker gets) does all of that once, never touches a GPU and never imports
candidate code, and then forks a fresh worker on request in ~50 ms. The child inherits
the warm interpreter, takes the pipes the harness passed it (``SCM_RIGHTS`` over a unix
socket) as its stdin/stdout/stderr, and runs :func:`opbench.run.worker.main` exactly as
a freshly started worker would: it selects its device, loads the backend and serves.

CUDA cannot survive a ``fork``, so the template checks before every fork that CUDA is
not initialised in it (it never should be) and refuses otherwise; the harness then
falls back to starting workers as new processes. Workers forked from one template share
its private ``/tmp`` (the same backend's kernels, never the harness's files).

The template reports each child's pid (in its PID namespace) and, when it reaps one,
its exit status, so the harness sees signals and exit codes as with ``subprocess``.
"""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from opbench.run.procfs import descendants, nspid
from opbench.run.worker_env import worker_env

log = logging.getLogger(__name__)

_FD_ENV = "OPBENCH_FORKSERVER_FD"


class ForkServerError(RuntimeError):
    """The template could not start or fork (the caller starts workers the slow way)."""


# ------------------------------------------------------------------ the template process


def _template_main() -> int:
    ctl = socket.socket(fileno=int(os.environ.pop(_FD_ENV)))
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    import torch

    poisoned_by = _first_poisoning_step(template_steps)
    if poisoned_by:
        ctl.send(json.dumps({"error": f"{_POISONED} ({poisoned_by})"}).encode())
        return 1
    # Everything imported so far is shared with the children copy-on-write; a collection
    # in a child would touch (and so copy) every page of it. Frozen objects are never
    # scanned: a fork's first answers took 30-60 ms on 2 cores without this.
    import gc

    gc.collect()
    gc.freeze()
    ctl.send(json.dumps({"ready": os.getpid()}).encode())
    children: set[int] = set()
    while True:
        ready, _, _ = select.select([ctl], [], [], 0.05)
        _reap(ctl, children)
        if not ready:
            continue
        try:
            data, fds, _, _ = socket.recv_fds(ctl, 65536, 3)
        except OSError:
            return 0
        if not data:
            return 0  # the harness is gone
        msg = json.loads(data)
        if msg.get("kill"):
            try:
                os.kill(int(msg["kill"]), signal.SIGKILL)
            except ProcessLookupError:
                pass
            continue
        if torch.cuda.is_initialized():
            for fd in fds:
                os.close(fd)
            ctl.send(json.dumps({"error": "CUDA is initialised in the fork server"}).encode())
            continue
        pid = os.fork()
        if pid == 0:
            _child(ctl, fds)  # never returns
        for fd in fds:
            os.close(fd)
        children.add(pid)
        ctl.send(json.dumps({"forked": pid}).encode())


#: The template's own ``CUDA_VISIBLE_DEVICES`` is empty; the value its forks restore.
_VISIBLE_ENV = "OPBENCH_FORK_CUDA_VISIBLE_DEVICES"
_UNSET = "(unset)"


def template_env(env: dict[str, str], device: str) -> dict[str, str]:
    """The template's environment for ``device``: on a GPU, one where CUDA cannot be
    asked anything by accident.

    Importing PyTorch's OpInfo database (the preload that makes an OpInfo worker start in
    milliseconds) asks ``torch.cuda.is_available()`` some twenty times and, when it says
    yes, reads the device's properties (``torch.utils._triton.has_triton``, flex
    attention's capability check), which initialises CUDA: the template's forks then
    cannot use it. So the template sees no GPU (``CUDA_VISIBLE_DEVICES`` empty, answered
    from the variable alone through NVML's check, never ``cuInit``), and each fork puts
    the harness's value back before its first CUDA call (:func:`restore_visible_devices`).
    """
    env = dict(env)
    if device.startswith("cuda"):
        env[_VISIBLE_ENV] = env.get("CUDA_VISIBLE_DEVICES", _UNSET)
        env["CUDA_VISIBLE_DEVICES"] = ""
        env["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    return env


def restore_visible_devices() -> None:
    """In a fork, before anything asks CUDA: the GPUs the harness gave the worker, and
    no cached answer computed while the template saw none."""
    if _VISIBLE_ENV not in os.environ:
        return
    value = os.environ.pop(_VISIBLE_ENV)
    if value == _UNSET:
        os.environ.pop("CUDA_VISIBLE_DEVICES", None)
    else:
        os.environ["CUDA_VISIBLE_DEVICES"] = value
    _forget_cuda_answers()


def _forget_cuda_answers() -> None:
    """Answers PyTorch cached while the template saw no GPU (a fork sees one)."""
    triton_utils = sys.modules.get("torch.utils._triton")
    for name in ("has_triton", "has_triton_package"):
        fn = getattr(triton_utils, name, None)
        if hasattr(fn, "cache_clear"):
            fn.cache_clear()


_POISONED = (
    "the fork server's template asked CUDA something (a device count is enough), so "
    "PyTorch marks its forks as unable to use CUDA"
)


def template_steps() -> list[tuple[str, Callable[[], Any]]]:
    """What the template does before its first fork, as named steps: import and warm up
    what every worker needs, and take the fingerprint workers compare themselves with.
    Nothing here may touch CUDA, not even ``torch.cuda.is_available()`` (``tests/run``
    checks on the CPU; on a GPU the template probes a fork after each step)."""
    from opbench.run import worker

    def imports() -> None:
        worker.preload()  # every module a worker imports before candidate code

    def warmed() -> None:
        worker.WARMED_BY_TEMPLATE = True

    def fingerprint() -> None:
        from opbench.instrument.integrity import Fingerprint

        worker.TEMPLATE_FINGERPRINT = Fingerprint()

    # a template for GPU workers sees no GPU (template_env) and warms up as for the CPU,
    # plus what a GPU worker's first Triton compile computes that needs no CUDA
    gpu = [("warm-up: Triton compiler key", worker.warm_triton_compiler)]
    return [
        ("imports", imports),
        *((f"warm-up: {name}", step) for name, step in worker.warm_up_steps("cpu")),
        *(gpu if _VISIBLE_ENV in os.environ else []),
        ("warm-up done", warmed),
        ("fingerprint", fingerprint),
    ]


def _first_poisoning_step(steps: Callable[[], list[tuple[str, Callable[[], Any]]]]) -> str:
    """Run the steps, probing a fork before the first and after each: the name of the
    first after which forks cannot use CUDA ('' if none), so the refusal says where.
    A PyTorch built without CUDA has no fork to spoil: the steps run without probes."""
    import torch

    if not torch.backends.cuda.is_built():
        for _, step in steps():
            step()
        return ""
    if _forks_cannot_use_cuda():
        return "before the warm-up: importing torch and opbench"
    for name, step in steps():
        step()
        if _forks_cannot_use_cuda():
            return f"after the step {name!r}"
    return ""


def _forks_cannot_use_cuda() -> bool:
    """Fork one probe child and ask it whether PyTorch considers it a bad fork: once a
    process has asked CUDA anything, its forks fail on their first CUDA call ("Cannot
    re-initialize CUDA in forked subprocess"). Checking ``torch.cuda.is_initialized()``
    is not enough (a device count alone poisons forks), and a template whose workers
    would all die must refuse to start, so that the harness starts workers the slow way."""
    pid = os.fork()
    if pid == 0:
        import torch

        os._exit(1 if torch.cuda._is_in_bad_fork() else 0)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) != 0


def _child(ctl: socket.socket, fds: list[int]) -> None:
    code = 70
    try:
        ctl.close()
        os.setsid()
        for i, fd in enumerate(fds):
            os.dup2(fd, i)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        restore_visible_devices()
        from opbench.run import worker

        code = worker.main()
    except SystemExit as e:  # a kernel's sys.exit ends the worker, like a process exit
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 70
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _reap(ctl: socket.socket, children: set[int]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            children.clear()
            return
        if pid == 0:
            return
        children.discard(pid)
        ctl.send(json.dumps({"exit": pid, "code": os.waitstatus_to_exitcode(status)}).encode())


# ------------------------------------------------------------------ the harness side


class ForkedProc:
    """The parts of ``subprocess.Popen`` that :class:`~opbench.run.pool.WorkerProcess` uses."""

    def __init__(
        self, server: ForkServer, ns_pid: int, host_pid: int | None, stdin, stdout
    ) -> None:
        self.server = server
        self.ns_pid = ns_pid
        self.pid = host_pid if host_pid is not None else -1
        self.stdin = stdin
        self.stdout = stdout
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.server.exit_code(self.ns_pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired("forked worker", timeout or 0)
            self.server.wait_for_exit(0.05)
        return self.returncode  # type: ignore[return-value]

    def kill(self) -> None:
        if self.poll() is not None:
            return
        if self.pid > 0:
            try:
                os.kill(self.pid, signal.SIGKILL)
                return
            except ProcessLookupError:
                return
        self.server.kill(self.ns_pid)


class ForkServer:
    """One template process (sandboxed like a worker) that forks workers on request."""

    def __init__(self, config: Any, log_dir: Path, device: str) -> None:
        from opbench.run import sandbox

        self._lock = threading.Lock()
        self._cond = threading.Condition()
        self._exits: dict[int, int] = {}
        self._replies: list[dict[str, Any]] = []
        self._closed = False
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock = parent
        env = template_env(worker_env(config, device), device)
        env[_FD_ENV] = str(child.fileno())
        self._wrapped = sandbox.wrap_command(
            [sys.executable, "-m", "opbench.run.forkserver"],
            mode=config.sandbox,
            env=env,
            hide=config.hide,
            expose=config.readable(),
            device=device,
        )
        self.sandbox_level = self._wrapped.level
        #: the host folder the template and its forks see as /tmp
        self.host_tmp = self._wrapped.host_tmp
        self.stderr_path = log_dir / "forkserver.stderr.log"
        with open(self.stderr_path, "ab") as err:
            self.proc = subprocess.Popen(
                self._wrapped.argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                env=self._wrapped.env,
                pass_fds=(child.fileno(),),
                start_new_session=True,
            )
        child.close()
        parent.settimeout(config.startup_timeout_s)
        try:
            hello = json.loads(parent.recv(65536) or b"{}")
        except (OSError, ValueError) as e:
            self.close()
            raise ForkServerError(f"fork server did not start: {e}") from None
        if "ready" not in hello:
            self.close()
            raise ForkServerError(f"fork server did not start: {hello.get('error', 'no reply')}")
        parent.settimeout(None)
        self.template_ns_pid = int(hello["ready"])
        self.template_pid = next(
            (
                p
                for p in [self.proc.pid, *descendants(self.proc.pid)]
                if (nspid(p) or [0])[-1] == self.template_ns_pid
            ),
            None,
        )
        self._reader = threading.Thread(target=self._read, daemon=True, name="opbench-forkserver")
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = self.sock.recv(65536)
            except OSError:
                data = b""
            with self._cond:
                if not data:
                    self._closed = True
                    self._cond.notify_all()
                    return
                msg = json.loads(data)
                if "exit" in msg:
                    self._exits[int(msg["exit"])] = int(msg["code"])
                else:
                    self._replies.append(msg)
                self._cond.notify_all()

    def alive(self) -> bool:
        return not self._closed and self.proc.poll() is None

    def spawn(self, stderr_fd: int, timeout: float = 30.0) -> ForkedProc:
        """Fork a worker whose stderr is ``stderr_fd``; returns its process handle."""
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        try:
            with self._lock:
                if not self.alive():
                    raise ForkServerError("fork server is not running")
                socket.send_fds(self.sock, [b'{"fork": 1}'], [in_r, out_w, stderr_fd])
                deadline = time.monotonic() + timeout
                with self._cond:
                    while not self._replies:
                        if self._closed or time.monotonic() > deadline:
                            raise ForkServerError("fork server did not answer")
                        self._cond.wait(0.1)
                    reply = self._replies.pop(0)
        except BaseException:
            for fd in (in_w, out_r):
                os.close(fd)
            raise
        finally:
            os.close(in_r)
            os.close(out_w)
        if "forked" not in reply:
            os.close(in_w)
            os.close(out_r)
            raise ForkServerError(reply.get("error", "fork failed"))
        ns_pid = int(reply["forked"])
        host = None
        if self.template_pid is not None:
            for p in descendants(self.template_pid):
                if (nspid(p) or [0])[-1] == ns_pid:
                    host = p
                    break
        return ForkedProc(
            self,
            ns_pid,
            host,
            os.fdopen(in_w, "wb", buffering=0),
            os.fdopen(out_r, "rb", buffering=0),
        )

    def exit_code(self, ns_pid: int) -> int | None:
        with self._cond:
            if ns_pid in self._exits:
                return self._exits[ns_pid]
            if self._closed:
                return -signal.SIGKILL  # the template died; its children went with it
        return None

    def wait_for_exit(self, timeout: float) -> None:
        with self._cond:
            self._cond.wait(timeout)

    def kill(self, ns_pid: int) -> None:
        try:
            with self._lock:
                self.sock.send(json.dumps({"kill": ns_pid}).encode())
        except OSError:
            pass

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self._wrapped.cleanup()


if __name__ == "__main__":
    sys.exit(_template_main())
