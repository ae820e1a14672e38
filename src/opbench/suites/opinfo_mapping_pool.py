"""The OpInfo mapping built in several processes at once.

On CUDA the first build of a machine's mapping takes most of a minute a dtype (an H200:
45 s of mapping for float32, every sample's variants run and synchronised one by one;
the CPU maps the same in ~4 s), and the quick profile maps two dtypes: 2.5 minutes of a
lent GPU machine's first OpInfo run went to it. Each OpInfo's samples are drawn from
its own seed (:func:`~opbench.suites.opinfo_samples.cached_samples`), so OpInfos map
independently: this module hands groups of them to ``jobs`` spawned processes (trusted
harness code: PyTorch's own OpInfo samples, no candidate's) and puts the entries back in
``op_db``'s order, the very list the serial build gives (``tests/suites/
test_opinfo_mapping_pool.py`` checks it entry for entry).

``OPBENCH_MAP_JOBS`` sets the processes (default: a quarter of the cores, at most 8; 1
on a machine of fewer than 8 cores, where each process's ~7 s import of ``op_db`` would
eat what it saves). A pool that breaks falls back to the serial build.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["MAP_STALL_S", "build_in_processes", "map_jobs", "rerun_alone", "run_in_processes"]

log = logging.getLogger(__name__)

#: Tasks per process: OpInfos differ a lot in cost (special functions take seconds), so
#: smaller groups, handed out as processes free up, even the load.
TASKS_PER_JOB = 4


def map_jobs() -> int:
    """Processes for a mapping build: ``OPBENCH_MAP_JOBS``, else a quarter of the cores
    (at most 8), 1 below 8 cores."""
    env = os.environ.get("OPBENCH_MAP_JOBS")
    if env:
        return max(1, int(env))
    cores = os.cpu_count() or 1
    return 1 if cores < 8 else min(8, cores // 4)


#: Seconds without a finished mapping task after which the tasks still out are given up
#: (:func:`run_in_processes`): a task maps ~20 OpInfos in seconds, after a process start
#: of ~15 s (a 4 x H100 host maps float32 in 40 s in 8 processes).
MAP_STALL_S = 180.0


def build_in_processes(
    device: str,
    kind: str,
    dtype: torch.dtype,
    jobs: int,
    map_group: Callable[[str, str, str, tuple[str, ...]], list[dict[str, Any]]],
    progress: Callable[[str], None] | None = None,
    *,
    stall_s: float = MAP_STALL_S,
) -> tuple[list[dict[str, Any]], list[str]] | None:
    """Every mapping entry of one kind and dtype, mapped in ``jobs`` processes, in the
    serial build's order, and the OpInfos whose mapping gave no answer; None when the
    pool broke (the caller builds serially). ``map_group(device, kind, dtype_name,
    opinfo_names)`` is the serial build over some OpInfos
    (:func:`opbench.suites.opinfo_mapping.map_group`, passed in, so this module needs
    nothing of the one that calls it), run in each spawned process.

    A task that gives no answer in ``stall_s`` (a sample whose kernel never ends on this
    device) is mapped again one OpInfo a task, so that only the OpInfo that hangs is
    left out; its name comes back second, and the caller keeps such a mapping off disk."""
    from opbench.suites.opinfo_samples import dtype_name, op_db

    infos = op_db()
    names = list(dict.fromkeys(info.name for info in infos))  # op_db's order, once each
    tasks = max(1, min(len(names), jobs * TASKS_PER_JOB))
    groups = [tuple(names[k::tasks]) for k in range(tasks)]  # interleaved: costs even out
    what = f"mapping OpInfo {kind} inputs, {dtype_name(dtype)}"
    tell = None if progress is None else (lambda line: progress(f"{what}: {line}"))
    results = run_in_processes(
        map_group,
        [(device, kind, dtype_name(dtype), g) for g in groups],
        jobs,
        tell,
        weights=[len(g) for g in groups],  # the groups hold every name once
        unit="OpInfo names",
        stall_s=stall_s,
    )
    if results is None:
        return None
    again = [name for g, r in zip(groups, results) if r is None for name in g]
    retried = rerun_alone(
        map_group,
        [(device, kind, dtype_name(dtype), (name,)) for name in again],
        jobs,
        tell,
        unit="OpInfo names",
        stall_s=stall_s,
    )
    results += retried
    lost = [name for name, r in zip(again, retried) if r is None]
    found = [e for r in results if r is not None for e in r]
    order = {(info.name, info.variant_test_name): n for n, info in enumerate(infos)}
    found.sort(key=lambda e: order[(e["opinfo"], e["vtn"])])  # stable: samples keep order
    return found, lost


def run_in_processes(
    fn: Callable[..., Any],
    tasks: list[tuple[Any, ...]],
    jobs: int,
    progress: Callable[[str], None] | None = None,
    *,
    weights: list[int] | None = None,
    unit: str = "tasks",
    stall_s: float | None = None,
) -> list[Any] | None:
    """``fn(*task)`` for every task in ``jobs`` spawned processes, the results in the
    tasks' order; None when the pool broke. ``fn`` must be importable by name (spawn).
    ``progress`` hears ``done/total UNIT in N processes`` as tasks finish (each task
    counting its ``weights`` entry, 1 by default; ``total`` their sum).

    ``stall_s``: when no task finishes for that long, the tasks still out are given up
    (their results are None; ``fn`` must not return None itself) and their processes
    killed. A process can sit forever in a GPU kernel that never ends (a loop bounded by
    an input's value), and a build must not sit with it."""
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    weights = weights or [1] * len(tasks)
    total = sum(weights)
    results: list[Any] = [None] * len(tasks)
    done = 0
    pool = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"))
    try:
        futures = {pool.submit(fn, *task): i for i, task in enumerate(tasks)}
        pending = set(futures)
        while pending:
            finished, pending = wait(pending, timeout=stall_s, return_when=FIRST_COMPLETED)
            if not finished:
                log.warning(
                    "no task finished in %.0f s: giving up %d of %d",
                    stall_s,
                    len(pending),
                    len(tasks),
                )
                if progress is not None:
                    progress(f"{done}/{total} {unit}; the rest gave no answer in {stall_s:.0f} s")
                break
            for future in finished:
                i = futures[future]
                results[i] = future.result()
                done += weights[i]
                if progress is not None:
                    progress(f"{done}/{total} {unit} in {jobs} processes")
    except BrokenProcessPool as e:
        log.warning("a process pool broke (%s); working in this process", e)
        return None
    finally:
        _stop(pool)
    return results


def rerun_alone(
    fn: Callable[..., Any],
    tasks: list[tuple[Any, ...]],
    jobs: int,
    progress: Callable[[str], None] | None = None,
    *,
    unit: str,
    stall_s: float,
) -> list[Any]:
    """The parts of tasks a pool gave up (:func:`run_in_processes`'s ``stall_s``), one
    part a task, each run again: so only a part that hangs again stays without an
    answer (None in its place; every one None where the pool broke)."""
    if not tasks:
        return []
    got = run_in_processes(
        fn, tasks, min(jobs, len(tasks)), progress,
        unit=f"{unit} given no answer, one a task", stall_s=stall_s,
    )  # fmt: skip
    return got if got is not None else [None] * len(tasks)


def _stop(pool: Any) -> None:
    """End the pool without waiting for its processes to exit on their own: every result
    is in by then, and a process that does not exit (a CUDA teardown that hangs, say)
    must not hold the build, as ``shutdown(wait=True)`` would. (Suspected when a 4 x H100
    build sat after its mapping, 2026-11-27; the stack dump showed the harness's own
    serial step instead, but nothing here needs the processes any more.) ``_processes``
    is the executor's own map of them (no public accessor exists)."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for p in processes:
        if p.is_alive():
            p.kill()
    for p in processes:
        p.join(timeout=5)
