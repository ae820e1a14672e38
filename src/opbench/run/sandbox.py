"""Running the worker inside a sandbox where the machine allows it.

Levels, from strongest: ``bwrap`` and ``none``. ``--sandbox auto`` takes the strongest
level that works here, ``required`` fails when no real sandbox is available, ``off``
runs the worker as a plain process. The level reached is recorded in the run.

Under ``bwrap`` (bubblewrap, Debian package ``bubblewrap``) the worker sees:

* the file system read-only (``--ro-bind / /``), with all capabilities dropped, so
  not even a root worker can remount it writable;
* a private, per-worker folder bound at ``/tmp`` as the only writable place (``HOME``,
  ``TMPDIR`` and the Triton cache point there); the harness deletes it when the worker
  goes. The host's ``/tmp`` is therefore invisible, except for the paths the worker
  needs (the Python installation, the import path, the kernel directory), which are
  bound back read-only;
* the ``hide`` paths (the run directory: the results store, logs and summary) replaced
  by an empty read-only folder, so a kernel can neither read nor tamper with results;
* its own PID namespace and a fresh ``/proc``: the judging process does not exist
  there, so ``/proc/<harness pid>/mem`` cannot be opened;
* its own network namespace (no interfaces but a loopback nobody listens on), IPC and
  UTS namespaces, and a private ``/dev`` (the GPU device nodes bound in for CUDA);
* an environment without variables that look like credentials.

The worker dies with the process that started it (``--die-with-parent``); the caller
must start workers from a thread that outlives them (:class:`~opbench.run.pool.WorkerFactory`
does), since the kernel delivers that signal when the starting *thread* exits.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

MODES = ("off", "auto", "required")

#: Environment variables never handed to candidate code.
_SECRET_ENV = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)", re.IGNORECASE)
#: ... except these, which name no secret and which tools need.
_KEEP_ENV = {"RAY_AUTH_MODE"}


class SandboxUnavailable(RuntimeError):
    """``--sandbox required`` on a machine where no sandbox works."""


@dataclass
class Wrapped:
    """A command ready to start: argv, environment, and what to clean up afterwards."""

    argv: list[str]
    env: dict[str, str]
    level: str
    cwd: str | None = None
    private_dirs: list[str] = field(default_factory=list)

    @property
    def host_tmp(self) -> str:
        """The host folder the command sees as ``/tmp``: its private one under bubblewrap,
        ``/tmp`` itself without a sandbox."""
        return self.private_dirs[0] if self.private_dirs else "/tmp"

    def cleanup(self) -> None:
        """Remove the worker's private folders (call after the worker has exited)."""
        for d in self.private_dirs:
            shutil.rmtree(d, ignore_errors=True)
        self.private_dirs = []


def _base_flags() -> list[str]:
    flags = [
        "--unshare-net",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
    ]
    if os.geteuid() == 0:
        # Real root keeps its capabilities inside bwrap unless told otherwise; without
        # CAP_SYS_ADMIN it cannot remount the read-only view writable.
        flags += ["--cap-drop", "ALL"]
    return flags


@functools.lru_cache(maxsize=1)
def bwrap_works() -> bool:
    """Whether bubblewrap is installed and can create every namespace we ask for here."""
    exe = shutil.which("bwrap")
    if not exe:
        return False
    try:
        r = subprocess.run(
            [
                exe,
                "--ro-bind",
                "/",
                "/",
                "--dev",
                "/dev",
                "--proc",
                "/proc",
                *_base_flags(),
                "true",
            ],
            capture_output=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


def available_level() -> str:
    """The strongest sandbox level this machine offers (``bwrap`` or ``none``)."""
    return "bwrap" if bwrap_works() else "none"


def _clean_env(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k in _KEEP_ENV or not _SECRET_ENV.search(k)}


def _is_under(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def _import_paths(env: dict[str, str]) -> list[str]:
    """Folders the worker's Python needs to see: the installation and its import path."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix}
    paths.update(p for p in sys.path if p)
    paths.update(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p)
    return sorted({os.path.realpath(p) for p in paths if os.path.exists(p)})


def _outermost(paths: Iterable[str]) -> list[str]:
    """``paths`` without those inside another one: a folder inside a hidden folder is
    hidden with it, and bwrap cannot mount it anyway (the outer tmpfs is read-only)."""
    unique = sorted(set(paths))
    return [p for p in unique if not any(q != p and _is_under(p, q) for q in unique)]


def wrap_command(
    cmd: list[str],
    *,
    mode: str,
    env: dict[str, str],
    hide: Iterable[str | Path] = (),
    expose: Iterable[str | Path] = (),
    device: str = "cpu",
) -> Wrapped:
    """Wrap ``cmd`` for the requested sandbox ``mode`` (off | auto | required).

    ``hide``: folders the worker must not see or touch (the run directory).
    ``expose``: folders it must be able to read even if they lie under ``/tmp`` or a
    hidden folder (the kernel directory). ``device``: ``cuda...`` binds the host's
    ``/dev`` (GPU device nodes) instead of a minimal one.
    Relative entries of ``PYTHONPATH`` are made absolute, since the worker starts in
    its private ``/tmp``.
    """
    if mode not in MODES:
        raise ValueError(f"--sandbox must be off, auto or required, not {mode!r}")
    env = dict(env)
    if env.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.pathsep.join(
            os.path.abspath(p) for p in env["PYTHONPATH"].split(os.pathsep) if p
        )
    if mode == "off":
        return Wrapped(list(cmd), env, "none")
    if not bwrap_works():
        if mode == "required":
            raise SandboxUnavailable(
                "--sandbox required, but bubblewrap is not usable here "
                "(install it with `apt-get install bubblewrap`, or use --sandbox auto/off)"
            )
        return Wrapped(list(cmd), env, "none")

    private = tempfile.mkdtemp(prefix="opbench-worker-")
    env = _clean_env(env)
    env.update(
        {
            "TMPDIR": "/tmp",
            "HOME": "/tmp",
            "TRITON_CACHE_DIR": "/tmp/.triton",
            "XDG_CACHE_HOME": "/tmp/.cache",
            "TORCHINDUCTOR_CACHE_DIR": "/tmp/.inductor",
        }
    )
    argv = [shutil.which("bwrap") or "bwrap", "--ro-bind", "/", "/"]
    if device.startswith("cuda"):
        argv += ["--dev-bind", "/dev", "/dev", "--tmpfs", "/dev/shm"]
    else:
        argv += ["--dev", "/dev"]
    argv += ["--proc", "/proc", "--bind", private, "/tmp"]
    # Bring back, read-only, what the worker needs from under the host's /tmp.
    hidden = _outermost(os.path.realpath(str(h)) for h in hide)
    exposed = [os.path.realpath(str(e)) for e in expose if os.path.exists(e)]
    # Order matters (later mounts cover earlier ones): paths brought back from /tmp, then
    # the hidden folders covered (also one inside a path just brought back: a checkout
    # under /tmp whose tests folder is on the import path holds the run directory), then
    # exposed folders that lie inside hidden ones.
    bound: list[str] = []
    for p in _import_paths(env):
        # /tmp itself (the current folder of a harness started in /tmp) is never bound
        # back: it would cover the private /tmp, read-only, and show the host's files
        if p != "/tmp" and _is_under(p, "/tmp") and not any(_is_under(p, h) for h in hidden):
            bound.append(p)
    for p in exposed:
        if _is_under(p, "/tmp") and not any(_is_under(p, h) for h in hidden):
            bound.append(p)
    for p in bound:
        argv += ["--ro-bind", p, p]
    for h in hidden:
        if not os.path.isdir(h):
            continue
        if _is_under(h, "/tmp") and not any(_is_under(h, b) for b in bound):
            continue  # already invisible: the private /tmp replaced it
        argv += ["--tmpfs", h, "--remount-ro", h]
    for p in exposed:
        if any(_is_under(p, h) for h in hidden):
            argv += ["--ro-bind", p, p]
    argv += [*_base_flags(), "--chdir", "/tmp", *cmd]
    return Wrapped(argv, env, "bwrap", cwd=None, private_dirs=[private])
