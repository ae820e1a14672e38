"""``HostScorers``: a Scorer on each Ray node, a batch spread across them (issue #35: one
host's driver makes CUDA contexts one at a time, so candidates per second grow with hosts,
not GPUs). On this one machine the "hosts" are two scorers on the local Ray node
(``per_node=2``); each is an ordinary Scorer in a Ray actor, judging in its own workers."""

from __future__ import annotations

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'opbench[ray]')")

from test_scorer import CHEAT, RIGHT, WRONG  # noqa: E402

import opbench  # noqa: E402
from opbench.agent.scorer_hosts import HostScorers  # noqa: E402

pytestmark = pytest.mark.slow

BATCH = [(RIGHT, "relu.default"), (WRONG, "relu.default"), (RIGHT, "relu.default"),
         (CHEAT, "relu.default"), (WRONG, "aten.relu.default")]  # fmt: skip


def test_verdicts_match_a_local_scorer_in_the_batch_order(local_ray) -> None:
    with opbench.Scorer(device="cpu", suite="smoke") as local:
        want = [local.score(src, op) for src, op in BATCH]
    with HostScorers(device="cpu", suite="smoke", lanes=1, per_node=2, chunk=1) as hosts:
        assert len(hosts.hosts) == 2 and len({h["pid"] for h in hosts.hosts}) == 2
        got = hosts.score_many(BATCH)
        stats = hosts.stats()
    assert (
        [v.correct for v in got] == [v.correct for v in want] == [True, False, True, False, False]
    )
    assert [sorted(v.failures) for v in got] == [sorted(v.failures) for v in want]
    assert [(v.tests, v.passed) for v in got] == [(v.tests, v.passed) for v in want]
    assert stats["candidates"] == len(BATCH) and stats["hosts"] == 2
    assert sum(h["candidates"] for h in stats["per_host"]) == len(BATCH)


def test_a_lost_host_s_chunk_is_judged_by_the_others_and_none_left_is_an_error(local_ray) -> None:
    with HostScorers(device="cpu", suite="smoke", lanes=1, per_node=2, chunk=2) as hosts:
        ray.kill(hosts.actors[0])  # its node lost, as far as the batch can tell
        got = hosts.score_many(BATCH)
        assert [v.correct for v in got] == [True, False, True, False, False]
        assert hosts.stats()["hosts"] == 1
        ray.kill(hosts.actors[1])
        with pytest.raises(RuntimeError, match="every host scorer is gone"):
            hosts.score_many(BATCH[:2])


def test_a_host_that_takes_too_long_over_a_chunk_counts_as_lost(local_ray) -> None:
    """A hung node must not hold the batch: past ``chunk_timeout_s`` its actor is killed
    and the chunk goes to the others (here every host is too slow: the batch fails)."""
    import time

    with HostScorers(device="cpu", suite="smoke", lanes=1, per_node=2,
                     chunk_timeout_s=0.01) as hosts:  # fmt: skip
        t0 = time.perf_counter()
        with pytest.raises(RuntimeError, match="every host scorer is gone"):
            hosts.score_many(BATCH[:2])
        assert time.perf_counter() - t0 < 30
        assert hosts.stats()["hosts"] == 0
