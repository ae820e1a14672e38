"""What every worker of a run is started with, and the name each worker gets.

:class:`WorkerConfig` is the run's settings for its workers (the backend, the device, the
sandbox, the limits; sent as a worker's first message), and :func:`worker_name` names a
worker uniquely across the nodes of a run. Used by the worker handle
(:mod:`opbench.run.worker_process`) and the worker factory (:mod:`opbench.run.pool`);
imports neither.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["WorkerConfig", "worker_name"]

#: Workers named by this process (every factory's): the counter in :func:`worker_name`.
_NAMED = itertools.count(1)


def worker_name(device: str) -> str:
    """A name no other worker of a run has, wherever it runs: the node (short host
    name), the device (its physical GPU where ``CUDA_VISIBLE_DEVICES`` renumbers them,
    as Ray does), the process and a counter of this process, ``vm.cpu.p812.worker-3``
    or ``gpu7.cuda5.p4410.worker-1`` (issue #35: every Ray node's was ``worker-1``)."""
    node = (os.uname().nodename or "node").split(".")[0]
    kind, _, index = device.partition(":")
    visible = [v for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if kind == "cuda" and visible:
        i = int(index or 0)
        index = visible[i].strip() if i < len(visible) else index
    return f"{node}.{kind}{index}.p{os.getpid()}.worker-{next(_NAMED)}"


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
