"""The timed calls a worker keeps for the harness: the last one, and one drawn uniformly
at random among all of them, so that a kernel lazy on most timed calls but not the last
is caught too (the harness judges both: ``judge/timed_output.py``)."""

from __future__ import annotations

from collections import Counter

import torch

from opbench.instrument.timed import keeping_timed, timed_outputs
from opbench.judge.timed_output import kept_outputs


def _counting() -> tuple[list, object]:
    kept: list = []
    n = [0]

    def fn() -> int:
        n[0] += 1
        return n[0]

    return kept, keeping_timed(fn, kept)


def test_the_last_call_is_kept_and_the_sample_is_uniform_over_all_calls() -> None:
    drawn: Counter[int] = Counter()
    for _ in range(3000):
        kept, call = _counting()
        for _ in range(10):
            call()
        assert kept[0] == (10, 0)  # (result, input draw): no draw_of, so draw 0
        drawn[kept[1][0]] += 1
    assert set(drawn) == set(range(1, 11))
    # 300 expected per call, sd ~16: a bias towards the first or last calls would show
    assert all(200 < c < 400 for c in drawn.values()), drawn


def test_the_worker_sends_the_sample_only_when_it_is_another_call() -> None:
    kept: list = []
    outs = iter([torch.ones(3), torch.zeros(3)])
    call = keeping_timed(lambda: next(outs), kept)
    call()
    sent = timed_outputs(kept, "cpu")
    assert "timed_sample" not in sent  # one call: the sample is the last
    call()
    sent = timed_outputs(kept, "cpu")
    assert torch.equal(sent["timed_output"], torch.zeros(3))
    if kept[1] is not kept[0]:
        assert torch.equal(sent["timed_sample"], torch.ones(3))
    whats = [w for w, _, _, _ in kept_outputs(sent)]
    assert whats[0] == "the last timed call"
    assert len(whats) == (2 if kept[1] is not kept[0] else 1)


def test_each_kept_output_carries_the_draw_its_call_held() -> None:
    """The harness judges a kept output against the reference of the draw its call saw:
    the wrapper asks ``draw_of`` with the call's own arguments, right after the call."""
    kept: list = []
    a, b = torch.zeros(2), torch.ones(2)
    draws = {id(a): 0, id(b): 1}
    call = keeping_timed(lambda x: x + 10, kept, lambda args, kwargs: draws[id(args[0])])
    call(a)
    call(b)
    sent = timed_outputs(kept, "cpu")
    assert torch.equal(sent["timed_output"], b + 10) and sent["timed_output_draw"] == 1
    if "timed_sample" in sent:
        assert torch.equal(sent["timed_sample"], a + 10) and sent["timed_sample_draw"] == 0
    got = {what: draw for what, _, _, draw in kept_outputs(sent)}
    assert got["the last timed call"] == 1
    # a draw index the harness did not plan is judged against the first draw
    assert kept_outputs({"timed_output": 1, "timed_output_draw": 7})[0][3] == 0
