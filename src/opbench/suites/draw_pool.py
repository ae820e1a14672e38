"""The threads that draw a large tensor's chunks side by side.

:func:`~opbench.suites.input_call.draw_seeded` draws a tensor in chunks, each from its
own seed, so the values depend on the chunking alone: any number of threads drawing the
chunks gives the same bits. PyTorch's CPU ops release the GIL while they run, so the
chunks' draws overlap; what stays serial is the Python between them.

Why a pool of its own, started early: a worker's judge counts the threads alive beside
a candidate (:mod:`opbench.instrument.neighbours`), so the worker starts the pool before
its census (:func:`start`); any other process (the harness, its judging processes) gets
one the first time it draws a large tensor. A forked child has none of its parent's
threads, so it forgets the parent's pool and starts its own.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

__all__ = ["ENV", "map_chunks", "start", "threads_wanted"]

#: Sets the pool's thread count (1: draw on the calling thread alone).
ENV = "OPBENCH_DRAW_THREADS"

_pool: ThreadPoolExecutor | None = None
_size: int | None = None  # None: not started in this process
_lock = threading.Lock()


def threads_wanted() -> int:
    """:data:`ENV`, else a quarter of the CPUs this process may run on, 1 to 8: the
    worker and the harness's judging process draw at once, and a machine of several
    GPUs runs a pair of them a GPU."""
    value = os.environ.get(ENV, "").strip()
    if value:
        try:
            n = int(value)
        except ValueError:
            raise ValueError(f"{ENV}={value!r}: expected a whole number of threads") from None
        return max(1, n)
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(8, cpus // 4))


def start(threads: int | None = None) -> int:
    """Start this process's pool (its threads alive on return) unless started already;
    returns its thread count (1: no pool, chunks drawn on the calling thread)."""
    global _pool, _size
    with _lock:
        if _size is not None:
            return _size
        n = threads_wanted() if threads is None else max(1, threads)
        if n > 1:
            pool = ThreadPoolExecutor(n, thread_name_prefix="opbench-draw")
            # a ThreadPoolExecutor starts a thread a submit: n tasks that wait for each
            # other hold n threads at once, so all n exist before the census
            gate = threading.Barrier(n)
            for f in [pool.submit(gate.wait) for _ in range(n)]:
                f.result()
            _pool = pool
        _size = n
        return n


def map_chunks(fn: Callable[[int], Any], chunks: Iterable[int]) -> list[Any]:
    """``[fn(i) for i in chunks]``, on the pool's threads where there is one."""
    if _size is None:
        start()
    pool = _pool
    if pool is None:
        return [fn(i) for i in chunks]
    return list(pool.map(fn, chunks))


def _forget() -> None:
    """In a forked child: the parent's threads are not here; start anew when needed."""
    global _pool, _size, _lock
    _pool, _size, _lock = None, None, threading.Lock()


os.register_at_fork(after_in_child=_forget)
