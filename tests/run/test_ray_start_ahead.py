"""Actors started ahead of a Ray run (while the suite is built) that do not come up:
a warning while the run still wants them, silence once the run is over. A resumed run
with nothing left ends before its actors are up, and Ray's shutdown then fails them; on
2026-11-27 that printed "an actor started ahead did not come up ... its owner has died"
after every such resume. Ray itself is faked: the factory's bookkeeping is what is
tested (real actors: ``tests/run/test_ray.py``)."""

from __future__ import annotations

import logging
from typing import Any

from opbench.run.pool import WorkerConfig
from opbench.run.ray_executor import RayWorkerFactory


class _DeadRay:
    """Just enough of ``ray`` for start_actors: every actor dies before it is ready."""

    def __init__(self) -> None:
        self.killed = 0

    def remote(self, **_: Any) -> Any:

        class _Actor:
            def __init__(self) -> None:
                self.warm = self.ready = self

            def remote(self, *_: Any) -> Any:
                return self

        class _Class:
            def remote(self, *_: Any) -> Any:
                return _Actor()

        return lambda cls: _Class()

    def get(self, ref: Any, timeout: float | None = None) -> Any:
        raise RuntimeError("The actor is dead because its owner has died.")

    def kill(self, actor: Any) -> None:
        self.killed += 1


def _factory() -> tuple[RayWorkerFactory, _DeadRay]:
    ray = _DeadRay()
    return RayWorkerFactory(ray, WorkerConfig(backend="aten", device="cpu"), None, cuda=False), ray


def test_an_actor_that_never_comes_up_is_reported_while_the_run_wants_it(caplog) -> None:
    factory, ray = _factory()
    factory.expect(2)
    with caplog.at_level(logging.WARNING, logger="opbench.run.ray_executor"):
        factory.start_actors(2)
    assert sum("did not come up" in r.getMessage() for r in caplog.records) == 2
    assert ray.killed == 2 and factory.take_started() is None


def test_after_the_run_is_over_the_lost_actors_are_not_reported(caplog) -> None:
    factory, ray = _factory()
    factory.expect(2)
    factory.close()  # nothing left to run: the run closes before its actors are up
    with caplog.at_level(logging.WARNING, logger="opbench.run.ray_executor"):
        factory.start_actors(2)
    assert not caplog.records, [r.getMessage() for r in caplog.records]
    assert ray.killed == 2
