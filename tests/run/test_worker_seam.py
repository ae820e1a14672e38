"""The executor asks of its worker source and workers only what ``run/worker_api.py``
writes down, and every source (local, Ray) and worker (a process, a Ray actor's) has all
of it: a method the executor starts to use must exist on each before a run finds out
(``warm`` went into the executor on 2026-11-28, and Ray's factory needed one too)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from opbench.run import executor
from opbench.run.pool import WorkerFactory, WorkerProcess
from opbench.run.ray_executor import RayWorkerFactory, RemoteWorker
from opbench.run.worker_api import WorkerHandle, WorkerSource


def _members(protocol: type) -> set[str]:
    names = {n for n in vars(protocol) if not n.startswith("_")}
    names |= set(getattr(protocol, "__annotations__", {}))
    return names


def _used(pattern: str) -> set[str]:
    """The attributes the executor's source reads through ``pattern`` (a regex whose
    group 1 is the attribute)."""
    source = Path(inspect.getsourcefile(executor) or "").read_text()
    return set(re.findall(pattern, source))


def test_the_executor_uses_only_what_the_seam_names():
    sources = _used(r"self\.factory\.([a-z_]+)")
    assert sources and sources <= _members(WorkerSource), sources - _members(WorkerSource)
    workers = _used(r"\b(?:got|current|worker|slot\.worker)\.([a-z_]+)")
    assert workers and workers <= _members(WorkerHandle), workers - _members(WorkerHandle)


@pytest.mark.parametrize("source", [WorkerFactory, RayWorkerFactory])
def test_every_worker_source_has_the_whole_seam(source):
    for name in _members(WorkerSource):
        assert hasattr(source, name) or name in _instance_attributes(source), (
            f"{source.__name__} lacks {name}"
        )
    for name in ("get", "warm", "preload"):
        want = list(inspect.signature(getattr(WorkerSource, name)).parameters)
        got = list(inspect.signature(getattr(source, name)).parameters)
        assert got[: len(want)] == want, f"{source.__name__}.{name}{got} against {want}"


@pytest.mark.parametrize("worker", [WorkerProcess, RemoteWorker])
def test_every_worker_has_the_whole_seam(worker):
    for name in _members(WorkerHandle):
        assert hasattr(worker, name) or name in _instance_attributes(worker), (
            f"{worker.__name__} lacks {name}"
        )
    want = list(inspect.signature(WorkerHandle.run_case).parameters)
    assert list(inspect.signature(worker.run_case).parameters) == want


def _instance_attributes(cls: type) -> set[str]:
    """Attributes ``cls.__init__`` (or its dataclass fields) sets on ``self``."""
    source = inspect.getsource(cls)
    return set(re.findall(r"self\.([a-z_]+)(?::[^=\n]+)?\s*=", source)) | set(
        getattr(cls, "__annotations__", {})
    )
