"""``subprocess.run`` with a time limit that really ends the command.

``subprocess.run(..., timeout=T)`` kills only the child it started and then waits for
its pipes to close; a grandchild that holds them (Inductor's compile workers, an
``opbench run``'s sandboxed workers) keeps the caller waiting long past ``T``: a
baseline benchmark stopped at a 300 s limit hung until the device call was cut off. Here
the command runs in a session of its own, and on timeout the whole process group is
killed before the pipes are drained.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Sequence
from typing import Any

__all__ = ["run_bounded"]


def run_bounded(
    cmd: Sequence[str], *, timeout: float, **kwargs: Any
) -> subprocess.CompletedProcess:
    """Run ``cmd`` (stdout and stderr captured as text) for at most ``timeout`` seconds.

    Raises :class:`subprocess.TimeoutExpired`, with what was captured, after killing the
    command and everything it started (its process group)."""
    with subprocess.Popen(
        list(cmd),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        **kwargs,
    ) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            raise subprocess.TimeoutExpired(proc.args, timeout, out, err) from None
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
