"""Where a run's judging processes come from: forks of one template process that has
imported torch, the judge and the suite's modules once (multiprocessing's ``forkserver``),
started by ``opbench run`` before its own imports.

On 4 x H200 (2026-11-28, ``benchmarks/results/scaling-opinfo-h200x4-alldtypes-2026-11-28.md``)
every slot's first plan came 7.3-9.6 s after the run's start: each slot's judging process
was spawned (:class:`~opbench.run.slot_judge.SlotJudge`), a fresh interpreter importing
torch, the judge and the OpInfo database (2.5-2.8 s of it on the 2-core CPU) before its
first test, all of them at once and after the harness's own imports. No number of GPUs
divides those seconds. Here :func:`start` launches the template as the command starts
(its imports overlap the harness's), and each judging process is a fork of it that needs
only its CUDA context.

The template runs the harness's code only (never a kernel): its children are as trusted
as a spawned judging process. CUDA cannot survive a ``fork``, and importing the OpInfo
database asks CUDA questions when a GPU is visible, so on a GPU the template sees none
(:func:`~opbench.run.forkserver.template_env`, as the workers' template does) and each
child puts the GPUs back before its first CUDA call (:func:`child_start`). A child that
finds its CUDA unusable anyway fails to start; :class:`SlotJudge` then calls
:func:`give_up` and spawns its processes as before, so the template can only cost time.

Two things a fork inherits that the template must not do (both met on 4 x H200,
2026-11-28; :mod:`opbench.run.judge_preload` avoids them): initialise CUDA by another
door (numba's ``cuInit`` inside the OpInfo database's import: every fork died with SIGSEGV
at its first CUDA call) and start an OpenMP team (dead in the fork, whose first parallel
region then waits forever). ``OPBENCH_JUDGE_FORKS=0`` spawns every judging process.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import threading
import time
from typing import Any

from opbench.run.warm_up import WARM_BY_SUITE

log = logging.getLogger(__name__)

__all__ = [
    "child_start", "context", "forked", "forks_wanted", "give_up", "plan_where", "start",
    "start_for_run", "started_at", "template_settings",
]  # fmt: skip

#: The template's settings, as the environment passes them to it (JSON: ``device``, the
#: ``warm`` entries). Read in the template by :mod:`opbench.run.judge_preload`.
TEMPLATE_ENV = "OPBENCH_JUDGE_TEMPLATE"

_lock = threading.Lock()
_state: dict[str, Any] = {"started": False, "refused": ""}


def start(device: str, warm: tuple[str, ...] = ()) -> None:
    """Launch the template (once a process; later calls change nothing, so the first
    caller's ``warm`` modules are the ones preloaded). Returns at once: the template
    imports in the background, and the first fork waits for it."""
    with _lock:
        if _state["started"] or _state["refused"] or not forks_wanted():
            return
        os.environ[TEMPLATE_ENV] = json.dumps({"device": device, "warm": list(warm)})
        from multiprocessing import forkserver

        forkserver.set_forkserver_preload(["opbench.run.judge_preload"])
        forkserver.ensure_running()
        _state["started"] = True
        _state["started_at"] = time.time()


def forks_wanted() -> bool:
    """``OPBENCH_JUDGE_FORKS``: ``1`` (the default) forks judging processes from the
    template, ``0`` spawns each (as before 2026-11-28; the escape hatch should a fork
    meet a library the template's warm-up cannot hide, as numba's ``cuInit`` was)."""
    value = os.environ.get("OPBENCH_JUDGE_FORKS", "1")
    if value not in ("0", "1"):
        raise ValueError(f"OPBENCH_JUDGE_FORKS must be 0 or 1, not {value!r}")
    return value == "1"


def started_at() -> float | None:
    """When :func:`start` launched the template (Unix time), if it did."""
    return _state.get("started_at")


def plan_where(device: str) -> str:
    """Where a slot on ``device`` plans and judges: ``OPBENCH_PLAN_IN`` ``thread`` (the
    harness's own threads), ``process`` (:class:`~opbench.run.slot_judge.SlotJudge`,
    forks of this module's template) or ``auto`` (the default: a process on a GPU,
    threads on the CPU).

    On 4 x H100 (2026-11-28, quick OpInfo profile, f32, 2,907 tests,
    ``results/scaling-opinfo-h100x4-2026-11-28.md``) threads took 106.7 s on 4 GPUs and
    processes 48.9 s; on 1 GPU processes took 102.2 s where threads had not finished in
    120 s. On the 2-core CPU a judging process only competes with the workers for the
    same two cores (traces 101.9 s against 94.0 s on threads), so the CPU keeps threads."""
    where = os.environ.get("OPBENCH_PLAN_IN", "auto")
    if where not in ("thread", "process", "auto"):
        raise ValueError(f"OPBENCH_PLAN_IN must be 'thread', 'process' or 'auto', not {where!r}")
    if where == "auto":
        return "process" if device.startswith("cuda") else "thread"
    return where


def start_for_run(device: str, suite: str) -> None:
    """:func:`start` where a run on ``device`` judges in processes (:func:`plan_where`),
    with ``suite``'s warm modules (``opbench run`` calls it before its own imports)."""
    if plan_where(device) == "process":
        start(device, WARM_BY_SUITE.get(suite.partition(":")[0], ()))


def context(device: str, warm: tuple[str, ...] = ()) -> Any:
    """The multiprocessing context a judging process on ``device`` starts from: forks of
    the template (started here if no one has), or ``spawn`` once :func:`give_up` was
    called or ``OPBENCH_JUDGE_FORKS=0`` (:func:`forks_wanted`)."""
    start(device, warm)
    if _state["refused"] or not forks_wanted():
        return multiprocessing.get_context("spawn")
    return multiprocessing.get_context("forkserver")


def forked(ctx: Any) -> bool:
    """Whether processes of ``ctx`` (from :func:`context`) are the template's forks."""
    return ctx.get_start_method() == "forkserver"


def give_up(reason: str) -> None:
    """Judging processes are spawned from now on (the template's fork could not judge)."""
    with _lock:
        if not _state["refused"]:
            log.warning("judging processes start anew from now on: %s", reason)
            _state["refused"] = reason


def child_start() -> None:
    """In a fork of the template, before anything asks CUDA: the GPUs back, and a refusal
    where PyTorch already considers CUDA unusable here (the caller then spawns)."""
    from opbench.run.forkserver import restore_visible_devices

    restore_visible_devices()
    import torch

    if torch.cuda._is_in_bad_fork():
        raise RuntimeError(
            "the judging template asked CUDA something before forking, so its forks cannot use CUDA"
        )


def template_settings() -> dict[str, Any]:
    """The settings :func:`start` passed to the template (empty outside it)."""
    raw = os.environ.get(TEMPLATE_ENV)
    return json.loads(raw) if raw else {}
