"""Kernels that remember answers instead of computing them, judged with timing on (CPU).

Every timed call of a non-mutating op used to see the very same input tensors, so a
kernel keyed on the input objects returned its remembered answer: right values, no work
(a memoizing ``mul`` was judged correct at 7.8x eager). Each timed call now holds one of
two draws of the case in the same tensors, the last two calls hold draw 0 then draw 1,
and two consecutive device-timed calls on different draws are judged besides
(``opbench/instrument/timing_inputs.py``, ``opbench/instrument/timed.py``).
"""

from __future__ import annotations

from pathlib import Path

import adversarial_corpus as corpus
import pytest


def _run(tmp_path: Path) -> dict:
    kernels = corpus.remembering_kernels(tmp_path / "k")
    return corpus.run_timed(tmp_path, kernels, corpus.REMEMBERING_TRACE)


@pytest.mark.slow
def test_remembered_answers_fail_and_honest_kernels_keep_their_speedup(tmp_path):
    by_op = _run(tmp_path)
    # keyed on the input objects: right for every trial, so only the timed calls show it
    remembering = by_op["minimum.default"]
    assert len(remembering) == 2
    for r in remembering:
        assert (r.status, r.category) == ("failed", "cheat"), r.message
        assert "timing draw 1" in r.message
    # keyed on addresses: a reused address may already trip a trial; never a pass
    (by_address,) = by_op["fmin.default"]
    assert by_address.status == "failed", by_address.message
    assert by_address.category in {"cheat", "wrong_result"}, by_address.message
    # lazy only while device-timed, honest for the calls judged before f163215: the
    # device-timed pair (two consecutive calls on different draws) catches it every time
    (lazy,) = by_op["maximum.default"]
    assert (lazy.status, lazy.category) == ("failed", "cheat"), lazy.message
    assert "device-timed" in lazy.message
    (honest,) = by_op["mul.Tensor"]
    assert honest.status == "passed" and honest.speedup is not None, honest.message
