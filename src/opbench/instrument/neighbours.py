"""Who else runs in the worker: the OS threads and child processes that a candidate's unit
started, and how much CPU anything but the timing thread took while the reference ran.

Runs in the WORKER, which reads ``/proc`` and per-thread CPU clocks here and decides
nothing: :mod:`opbench.judge.neighbour_verdict` in the harness turns the readings into
``tampering``.

Why it exists: a kernel does not need to be fast to win, only to make the reference
slow. A module that starts a thread (through ``_thread``, ``ctypes``, a C library, a
child process) which spins, holds the GIL, or launches GPU work while the reference's
calls are timed, and sleeps while its own kernel is being called, read 154-281x on the
CPU and 2.03x on an H100 while its honest twin read 0.6x and 1.01x. None of the judge's
other checks looks at who else is using the machine.

What is recorded, each as plain data:

* **The census**: the worker's OS threads (``/proc/self/task``, which sees threads that
  :mod:`threading` does not: ``_thread``, C and CUDA threads) and its descendant
  processes (``/proc/PID/task/TID/children``, recursively; the worker is made a child
  subreaper, so a double-forked daemon is reparented to it and stays visible), taken
  just before the unit is imported. Anything alive later that is not in it is a
  *newcomer*, described by tid, name, state and, for a Python thread, the function it
  runs and where.
* **Reference windows**: around each of the reference's timed calls (device-time
  batches) and rounds (host-inclusive rounds, side-stream and synced checks), outside
  the timed interval, the CPU time of every thread but the timing thread and of every
  descendant process, the process's CPU time and the wall time. On a GPU each window
  also starts after a device-wide synchronize and ends after the next one, so work the
  candidate queued earlier has drained before the reference starts, and anything queued
  inside the window needed a thread that the window saw run.

The clocks are read with ``clock_gettime`` on the Linux per-thread and per-process CPU
clocks (nanoseconds; ``/proc/PID/schedstat`` reads 0 on some kernels, these do not).
Functions are bound at import, before any candidate code runs.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch

from opbench.run.procfs import descendants

__all__ = ["Census", "NeighbourWatch", "census", "enable_subreaper"]

_listdir = os.listdir
_open = open
_getpid = os.getpid
_clock_ns = time.clock_gettime_ns
_perf_ns = time.perf_counter_ns
_native_id = threading.get_native_id
_current_frames = sys._current_frames
_get_num_threads = torch.get_num_threads
_PROCESS_CPU = time.CLOCK_PROCESS_CPUTIME_ID
_PR_SET_CHILD_SUBREAPER = 36
_THREADING = "threading.py"


def _read(path: str) -> str:
    try:
        with _open(path) as f:
            return f.read()
    except OSError:
        return ""


def enable_subreaper() -> bool:
    """Make this process a child subreaper: orphaned descendants (a double fork) are
    reparented to it instead of to init, so the census still finds them. False where
    the call is not available (not Linux)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _thread_clock(tid: int) -> int:
    """The Linux CPU clock of one thread of this process (MAKE_THREAD_CPUCLOCK)."""
    return ((~tid) << 3) | 6


def _process_clock(pid: int) -> int:
    """The Linux CPU clock of a whole process (MAKE_PROCESS_CPUCLOCK)."""
    return ((~pid) << 3) | 2


def _cpu_ns(clock: int) -> int | None:
    try:
        return _clock_ns(clock)
    except OSError:  # gone
        return None


def _tids() -> frozenset[int]:
    try:
        return frozenset(int(t) for t in _listdir("/proc/self/task"))
    except OSError:
        return frozenset()


@dataclass(frozen=True)
class Census:
    """The worker's OS threads and descendant processes at one moment."""

    threads: frozenset[int]
    processes: frozenset[int]
    python_threads: frozenset[int] = frozenset()


def census() -> Census:
    """This process's threads (by tid), descendants (by pid) and Python threads (by ident)."""
    return Census(_tids(), frozenset(descendants(_getpid())), frozenset(_current_frames()))


def _intraop_threads() -> int:
    return int(_get_num_threads())


def _stat_fields(path: str) -> tuple[str, str]:
    """(name, state) from a ``stat`` file (the name may hold spaces and parentheses)."""
    text = _read(path)
    if not text:
        return "?", "gone"
    name = text[text.find("(") + 1 : text.rfind(")")]
    rest = text[text.rfind(")") + 2 :].split()
    return name, (rest[0] if rest else "?")


def _where(frame: Any) -> str:
    """The function a Python thread was started with and the line it is at now."""
    stack = []
    f = frame
    while f is not None:
        stack.append(f)
        f = f.f_back
    # the outermost frame that is not the threading module's bootstrap
    outer = next(
        (f for f in reversed(stack) if not f.f_code.co_filename.endswith(_THREADING)), frame
    )
    code, now = outer.f_code, frame.f_code
    return (
        f"started in {code.co_name} ({code.co_filename}:{code.co_firstlineno}), "
        f"now in {now.co_name} ({now.co_filename}:{frame.f_lineno})"
    )


# Like agent.client.Usage, kept apart: CPU ns over windows, not request totals
@dataclass
class _Window:
    """Sums over the reference's windows (ns)."""

    windows: int = 0
    wall_ns: int = 0
    process_cpu_ns: int = 0
    others_cpu_ns: int = 0
    pool_cpu_ns: int = 0
    #: per thread / process (``"thread 123 (name)"``): CPU ns taken inside the windows
    by_task: dict[str, int] = field(default_factory=dict)


class NeighbourWatch:
    """The census before import, the newcomers seen since, and the reference windows.

    ``look()`` after import, after every correctness call and after every timed batch
    adds what is alive and new to ``seen`` (and to the tasks the windows clock); :meth:`reference` brackets the reference's timed
    calls. :meth:`readings` is what the worker sends, :meth:`reset` starts a new test.
    """

    def __init__(self, baseline: Census | None = None, pool: frozenset[int] = frozenset()) -> None:
        """``pool``: the intra-op pool's threads (they may run beside the reference, up to
        the pinned thread count); ``baseline``: the census before import (now, if None)."""
        self.baseline = baseline or census()
        self.pool = pool
        self.timing_tid = _native_id()
        self.seen: dict[str, dict[str, Any]] = {}
        self._win = _Window()
        self._tasks: list[tuple[str, int]] = []  # (label, clock) of every other task
        self._pool_labels = frozenset(f"thread {t}" for t in pool)
        self._refresh_tasks(self.baseline)

    # ------------------------------------------------------------------ the census
    def look(self) -> None:
        """Note every thread and process alive now that was not in the baseline."""
        now = census()
        self._refresh_tasks(now)
        pid = _getpid()
        for tid in now.threads - self.baseline.threads:
            key = f"thread {tid}"
            if key not in self.seen:
                name, state = _stat_fields(f"/proc/{pid}/task/{tid}/stat")
                if state != "gone":
                    self.seen[key] = {"kind": "thread", "tid": tid, "name": name, "state": state}
        for p in now.processes - self.baseline.processes:
            key = f"process {p}"
            if key not in self.seen:
                name, state = _stat_fields(f"/proc/{p}/stat")
                if state not in ("gone", "Z"):
                    cmd = _read(f"/proc/{p}/cmdline").replace("\0", " ").strip()[:200]
                    self.seen[key] = {
                        "kind": "process",
                        "pid": p,
                        "name": name,
                        "state": state,
                        "cmdline": cmd,
                    }
        frames = _current_frames()
        for ident in set(frames) - set(self.baseline.python_threads):
            key = f"python thread {ident}"
            if key not in self.seen:
                self.seen[key] = {"kind": "python", "ident": ident, "where": _where(frames[ident])}
        del frames

    def _refresh_tasks(self, now: Census) -> None:
        tasks = [(f"thread {t}", _thread_clock(t)) for t in now.threads if t != self.timing_tid]
        tasks += [(f"process {p}", _process_clock(p)) for p in now.processes]
        self._tasks = tasks

    # ------------------------------------------------------------------ reference windows
    @contextmanager
    def reference(self) -> Iterator[None]:
        """Bracket one stretch of the reference's timed work (outside its timed interval)."""
        tasks = self._tasks
        before = [_cpu_ns(c) for _, c in tasks]
        proc0 = _clock_ns(_PROCESS_CPU)
        t0 = _perf_ns()
        try:
            yield
        finally:
            t1 = _perf_ns()
            proc1 = _clock_ns(_PROCESS_CPU)
            w = self._win
            w.windows += 1
            w.wall_ns += t1 - t0
            w.process_cpu_ns += proc1 - proc0
            for (label, clock), b in zip(tasks, before):
                a = _cpu_ns(clock)
                if a is None or b is None or a <= b:
                    continue
                if label in self._pool_labels:
                    w.pool_cpu_ns += a - b
                    continue
                w.others_cpu_ns += a - b
                w.by_task[label] = w.by_task.get(label, 0) + (a - b)

    # ------------------------------------------------------------------ what the worker sends
    def readings(self) -> dict[str, Any]:
        """Plain data for the harness: the newcomers seen, and the window sums."""
        w = self._win
        return {
            "newcomers": list(self.seen.values()),
            "intraop_threads": _intraop_threads(),
            "reference_windows": {
                "windows": w.windows,
                "wall_ns": w.wall_ns,
                "process_cpu_ns": w.process_cpu_ns,
                "others_cpu_ns": w.others_cpu_ns,
                "pool_cpu_ns": w.pool_cpu_ns,
                "by_task": dict(sorted(w.by_task.items(), key=lambda kv: -kv[1])[:8]),
            },
        }

    def reset(self) -> None:
        """Start a new test: forget the windows and the newcomers (one still alive is
        seen again by the next :meth:`look`)."""
        self._win = _Window()
        self.seen = {}
