"""Scoring on many hosts: one :class:`~opbench.agent.scorer.Scorer` per node of a Ray
cluster, a batch spread across them.

Why hosts and not more GPUs: every candidate is judged in a fresh worker process with a
CUDA context of its own (the trust boundary: no candidate's process judges another),
and the driver makes contexts one at a time for the whole host. A 4 x H200 host made
5-6 a second whether its forks used 1, 2 or 4 GPUs, MPS or not, and one scorer judged
5.6-6.6 candidates a second there however many GPUs it had; one scorer process per GPU
gave the same total (``benchmarks/results/cuda-context-rate-h200x4.md``,
``scorer-throughput-cuda.md``). Each host has its own driver, so candidates per second
grow with hosts.

Each node gets a Ray actor (pinned to it, holding the node's GPUs on ``cuda``) that owns
an ordinary ``Scorer``: its lanes, templates and spares, its cases and expectations, its
judging, all on that node, exactly as a local scorer does. :meth:`HostScorers.score_many`
cuts a batch into chunks and hands the next chunk to whichever host is free, so a slow
host takes fewer; the verdicts come back in the batch's order. A host that dies
mid-chunk (its node lost) has that chunk judged again by the others; only when none is
left does the call fail.
"""

from __future__ import annotations

import logging
import os
import queue
import socket
import threading
import time
from collections.abc import Iterable
from typing import Any

from opbench.agent.scorer import Scorer, Verdict
from opbench.run.ray_executor import connect_ray

__all__ = ["HostScorers"]

log = logging.getLogger(__name__)


class _HostScorer:
    """The Ray actor on one node: an ordinary Scorer there, its verdicts as plain dicts."""

    def __init__(self, kwargs: dict[str, Any]) -> None:
        self.scorer = Scorer(**kwargs)

    def info(self) -> dict[str, Any]:
        import ray

        return {
            "host": socket.gethostname(),
            "ray_node": ray.get_runtime_context().get_node_id(),
            "pid": os.getpid(),
            "gpus": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "lanes": len(self.scorer.lanes),
        }

    def warm(self) -> float:
        return self.scorer.warm()

    def score_many(self, items: list[tuple[str, str]]) -> list[dict[str, Any]]:
        return [v.to_dict() for v in self.scorer.score_many(items)]

    def stats(self) -> dict[str, Any]:
        return self.scorer.stats()

    def reset_stats(self) -> None:
        self.scorer.reset_stats()

    def close(self) -> None:
        self.scorer.close()


class HostScorers:
    """Scorers on the nodes of a Ray cluster (``ray_address``; none: this process's Ray,
    or a local one), one a node, ``lanes`` lanes each; every other argument is the
    :class:`~opbench.agent.scorer.Scorer`'s. On ``cuda`` only nodes with GPUs take part
    and each scorer gets all of its node's GPUs. ``hosts`` caps how many nodes are used;
    ``per_node`` puts more than one scorer on a node (they share its context rate: for
    nodes whose one harness process would be short of CPU, and for tests on one machine).
    ``chunk_timeout_s``: a host that takes longer over one chunk is treated as lost (its
    actor killed, the chunk handed to the others): a node that hangs rather than dies
    (its network gone, say) otherwise holds the batch forever.
    """

    def __init__(
        self,
        device: str = "cpu",
        *,
        lanes: int = 4,
        ray_address: str | None = None,
        hosts: int | None = None,
        per_node: int = 1,
        chunk: int | None = None,
        chunk_timeout_s: float | None = None,
        **scorer_kwargs: Any,
    ) -> None:
        ray = connect_ray(ray_address, "scoring on several hosts")
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        cuda = device.startswith("cuda")
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        if cuda:
            nodes = [n for n in nodes if n.get("Resources", {}).get("GPU", 0) >= 1]
        if not nodes:
            raise RuntimeError(
                "no Ray node to score on" + (" has a GPU" if cuda else "") + " in the cluster"
            )
        nodes = nodes[: hosts or len(nodes)]
        kwargs = dict(scorer_kwargs, device=device, workers=lanes)
        self.chunk = chunk or 2 * lanes  # keeps a host's lanes busy between hand-outs
        self.chunk_timeout_s = chunk_timeout_s
        self._ray = ray
        self.actors: list[Any] = []
        for node in nodes:
            gpus = int(node["Resources"].get("GPU", 0)) // per_node if cuda else 0
            if cuda and gpus < 1:
                raise ValueError(
                    f"per_node={per_node} scorers on a node of "
                    f"{int(node['Resources']['GPU'])} GPU(s): each needs a GPU"
                )
            cls = ray.remote(num_cpus=0, num_gpus=gpus, max_restarts=0)(_HostScorer)
            where = NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
            for _ in range(per_node):
                self.actors.append(cls.options(scheduling_strategy=where).remote(kwargs))
        self.hosts = ray.get([a.info.remote() for a in self.actors])
        self._alive = list(range(len(self.actors)))
        self._lock = threading.Lock()
        self._busy_s = 0.0
        self._scored = 0

    # ------------------------------------------------------------------ public
    def warm(self) -> float:
        """Start every host's lanes now; the seconds it took (the slowest host's)."""
        t0 = time.perf_counter()
        self._ray.get([self.actors[i].warm.remote() for i in self._alive])
        return time.perf_counter() - t0

    def score(self, source: str, op: str) -> Verdict:
        return self.score_many([(source, op)])[0]

    def score_many(self, sources_and_ops: Iterable[tuple[str, str]]) -> list[Verdict]:
        """Judge a batch across the hosts (chunks to whichever is free); the verdicts in
        the batch's order. Raises when every host is gone."""
        items = list(sources_and_ops)
        todo: queue.Queue[tuple[int, list[tuple[str, str]]]] = queue.Queue()
        for start in range(0, len(items), self.chunk):
            todo.put((start, items[start : start + self.chunk]))
        run = _Batch(items, todo.qsize())
        t0 = time.perf_counter()
        with self._lock:
            hosts = list(self._alive)
        threads = [threading.Thread(target=self._feed, args=(i, todo, run)) for i in hosts]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        with self._lock:
            self._busy_s += time.perf_counter() - t0
            self._scored += sum(v is not None for v in run.out)
        if run.error is not None:
            raise run.error
        missing = sum(v is None for v in run.out)
        if missing:
            raise RuntimeError(
                f"{missing} of {len(items)} candidates not judged: every host scorer is gone"
            )
        return [v for v in run.out if v is not None]

    def stats(self) -> dict[str, Any]:
        """Candidates/s over the time :meth:`score_many` ran, and each host's own
        :meth:`~opbench.agent.scorer.Scorer.stats`."""
        per_host = self._ray.get([self.actors[i].stats.remote() for i in self._alive])
        with self._lock:
            busy, n = self._busy_s, self._scored
        return {
            "candidates": n,
            "hosts": len(self._alive),
            "lanes": sum(h["lanes"] for h in per_host),
            "busy_s": round(busy, 3),
            "candidates_per_s": round(n / busy, 2) if busy > 0 else None,
            "per_host": [dict(self.hosts[i], **s) for i, s in zip(self._alive, per_host)],
        }

    def reset_stats(self) -> None:
        self._ray.get([self.actors[i].reset_stats.remote() for i in self._alive])
        with self._lock:
            self._busy_s, self._scored = 0.0, 0

    def close(self) -> None:
        """Stop every host's workers and its actor."""
        for i in self._alive:
            try:
                self._ray.get(self.actors[i].close.remote(), timeout=60)
            except Exception as e:  # noqa: BLE001 - a lost host has nothing to close
                log.debug("host scorer %d: %s", i, e)
            self._ray.kill(self.actors[i])
        self._alive = []

    def __enter__(self) -> HostScorers:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ inside
    def _feed(self, host: int, todo: queue.Queue, run: _Batch) -> None:
        """One host's loop: take a chunk, judge it there, place its verdicts; a chunk
        whose host died goes back for the others, who wait for it until every chunk of
        the batch is judged."""
        while not run.finished():
            try:
                start, chunk = todo.get(timeout=0.1)
            except queue.Empty:
                continue
            try:
                ref = self.actors[host].score_many.remote(chunk)
                got = self._ray.get(ref, timeout=self.chunk_timeout_s)
            except Exception as e:  # noqa: BLE001 - Ray's errors for a lost actor or node
                if not _actor_lost(e):
                    run.fail(e)
                    return
                if _timed_out(e):
                    self._ray.kill(self.actors[host])
                log.warning("host scorer %s is gone (%s); its chunk goes to the others",
                            self.hosts[host].get("host"), type(e).__name__)  # fmt: skip
                with self._lock:
                    if host in self._alive:
                        self._alive.remove(host)
                todo.put((start, chunk))
                return
            run.place(start, [Verdict(**v) for v in got])


class _Batch:
    """One score_many call's state, shared by its hosts' threads."""

    def __init__(self, items: list[Any], chunks: int) -> None:
        self.out: list[Verdict | None] = [None] * len(items)
        self.error: BaseException | None = None
        self._left = chunks
        self._lock = threading.Lock()

    def place(self, start: int, verdicts: list[Verdict]) -> None:
        with self._lock:
            self.out[start : start + len(verdicts)] = verdicts
            self._left -= 1

    def fail(self, error: BaseException) -> None:
        with self._lock:
            self.error = self.error or error
            self._left = 0  # the others stop taking chunks

    def finished(self) -> bool:
        with self._lock:
            return self._left <= 0


def _actor_lost(error: BaseException) -> bool:
    """Whether Ray says the host's actor is gone, or took longer than a chunk may."""
    from ray.exceptions import ActorDiedError, ActorUnavailableError, RayActorError

    lost = (RayActorError, ActorDiedError, ActorUnavailableError)
    return isinstance(error, lost) or _timed_out(error)


def _timed_out(error: BaseException) -> bool:
    from ray.exceptions import GetTimeoutError

    return isinstance(error, GetTimeoutError)
