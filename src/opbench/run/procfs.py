"""What ``/proc`` says about a process: its children, all its descendants, its resident
memory, its pids in nested PID namespaces. The worker pool and the fork server watch
their processes with it, and the worker its own descendants
(:mod:`opbench.instrument.neighbours`): ``listdir`` and ``open`` are bound at import, so
candidate code imported later that patches ``os`` does not change what the worker reads.
Linux only, and best effort: where the kernel lacks a file, the answer is empty (or None)
rather than an error.
"""

from __future__ import annotations

import os

_listdir = os.listdir
_open = open

__all__ = ["children", "descendants", "nspid", "rss_kb"]


def children(pid: int) -> list[int]:
    """Child pids from ``/proc/PID/task/*/children`` (empty where the kernel lacks it)."""
    kids: list[int] = []
    try:
        tasks = _listdir(f"/proc/{pid}/task")
    except OSError:
        return kids
    for tid in tasks:
        try:
            with _open(f"/proc/{pid}/task/{tid}/children") as f:
                kids.extend(int(x) for x in f.read().split())
        except (OSError, ValueError):
            continue
    return kids


def descendants(pid: int) -> list[int]:
    """Every pid below ``pid`` (children, their children, ...), nearest first."""
    out, stack = [], [pid]
    while stack:
        p = stack.pop()
        kids = children(p)
        out.extend(kids)
        stack.extend(kids)
    return out


def rss_kb(pid: int) -> int | None:
    """Resident memory of one process in kB (``VmRSS``): None when it is gone, 0 for a
    zombie or kernel thread (no ``VmRSS`` line)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return 0  # a zombie or kernel thread has no VmRSS line


def nspid(pid: int) -> list[int]:
    """The pid in each PID namespace it lives in, outermost first (``NSpid``; empty when
    unknown)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return [int(x) for x in line.split()[1:]]
    except (OSError, ValueError):
        pass
    return []
