"""The environment a worker process starts with. Runs in the HARNESS; shared by the
worker pool (:mod:`opbench.run.pool`, workers started anew) and the fork server
(:mod:`opbench.run.forkserver`, the template workers are forked from), and importing
neither.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["worker_env"]


def worker_env(config: Any, device: str) -> dict[str, str]:
    """The environment of a worker (or of the template workers are forked from): this
    process's, with ``config.env`` (a :class:`~opbench.run.pool.WorkerConfig`'s) on top.

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
