"""The timed calls a worker keeps for the harness: the last one, and one drawn uniformly
at random among all of them, so that a kernel lazy on most timed calls but not the last
is caught too (the harness judges both: ``judge/timed_output.py``)."""

from __future__ import annotations

from collections import Counter

import torch

from opbench.instrument.timed import keeping_last, last_output
from opbench.judge.timed_output import kept_outputs


def _counting() -> tuple[list, object]:
    kept: list = []
    n = [0]

    def fn() -> int:
        n[0] += 1
        return n[0]

    return kept, keeping_last(fn, kept)


def test_the_last_call_is_kept_and_the_sample_is_uniform_over_all_calls() -> None:
    drawn: Counter[int] = Counter()
    for _ in range(3000):
        kept, call = _counting()
        for _ in range(10):
            call()
        assert kept[0] == 10
        drawn[kept[1]] += 1
    assert set(drawn) == set(range(1, 11))
    # 300 expected per call, sd ~16: a bias towards the first or last calls would show
    assert all(200 < c < 400 for c in drawn.values()), drawn


def test_the_worker_sends_the_sample_only_when_it_is_another_call() -> None:
    kept: list = []
    outs = iter([torch.ones(3), torch.zeros(3)])
    call = keeping_last(lambda: next(outs), kept)
    call()
    sent = last_output(kept, "cpu")
    assert "timed_sample" not in sent  # one call: the sample is the last
    call()
    sent = last_output(kept, "cpu")
    assert torch.equal(sent["timed_output"], torch.zeros(3))
    if kept[1] is not kept[0]:
        assert torch.equal(sent["timed_sample"], torch.ones(3))
    whats = [w for w, _, _ in kept_outputs(sent)]
    assert whats[0] == "the last timed call"
    assert len(whats) == (2 if kept[1] is not kept[0] else 1)
