"""The timed calls a worker keeps for the harness: the last two, and one drawn uniformly
at random among all of them, so that a kernel lazy on most timed calls but not the last
is caught too, and so is one that hands back a stored answer on the last two calls (which
hold the two input draws in the same tensors); the harness judges all three
(``judge/timed_output.py``)."""

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
        assert kept[1] == (9, 0)
        assert kept[2:4] == [None, None]  # no phase: no device-timed pair
        drawn[kept[4][0]] += 1
    assert set(drawn) == set(range(1, 11))
    # 300 expected per call, sd ~16: a bias towards the first or last calls would show
    assert all(200 < c < 400 for c in drawn.values()), drawn


def test_the_worker_sends_each_kept_call_once() -> None:
    kept: list = []
    outs = iter([torch.full((3,), float(i)) for i in range(3)])
    call = keeping_timed(lambda: next(outs), kept)
    call()
    sent = timed_outputs(kept, "cpu")
    assert set(sent) == {"timed_output", "timed_output_meta", "timed_output_draw"}
    call()
    sent = timed_outputs(kept, "cpu")
    assert torch.equal(sent["timed_output"], torch.ones(3))
    assert torch.equal(sent["timed_previous"], torch.zeros(3))
    assert "timed_sample" not in sent  # two calls: the sample is one of the last two
    call()
    sent = timed_outputs(kept, "cpu")
    assert torch.equal(sent["timed_previous"], torch.ones(3))
    if kept[4] is not kept[0] and kept[4] is not kept[1]:
        assert torch.equal(sent["timed_sample"], torch.zeros(3))
    whats = [w for w, _, _, _ in kept_outputs(sent)]
    assert whats[:2] == ["the last timed call", "the timed call before the last"]
    assert len(whats) == (3 if "timed_sample" in sent else 2)


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
    assert torch.equal(sent["timed_previous"], a + 10) and sent["timed_previous_draw"] == 0
    got = {what: draw for what, _, _, draw in kept_outputs(sent)}
    assert got == {"the last timed call": 1, "the timed call before the last": 0}
    # a draw index the harness did not plan is judged against the first draw
    assert kept_outputs({"timed_output": 1, "timed_output_draw": 7})[0][3] == 0


def test_the_harness_labels_the_last_two_calls_itself() -> None:
    """The last two timed calls hold draw 0 then draw 1 by protocol: a worker message
    that labels them otherwise (a candidate that rewrote the labels, so its remembered
    answer is compared with the draw it was computed for) is judged by the protocol's
    labels; after a one-draw timing every call held draw 0."""
    from opbench.judge.timed_output import kept_outputs_problem

    sent = {"timed_output": 1, "timed_output_draw": 0, "timed_previous": 2,
            "timed_previous_draw": 1, "timed_sample": 3, "timed_sample_draw": 1}  # fmt: skip
    two = {**sent, "timing": {"input_draws": 2}}
    got = {what: draw for what, _, _, draw in kept_outputs(two)}
    assert got == {"the last timed call": 1, "the timed call before the last": 0,
                   "a timed call drawn at random": 1}  # fmt: skip
    one = {**sent, "timing": {"input_draws": 1}}
    assert {draw for *_, draw in kept_outputs(one)} == {0}
    # a program timed against eager and then its compiled form: the compiled pair came last
    prog = {**sent, "timing": {"input_draws": 1}, "timing_compile": {"input_draws": 2}}
    assert [d for *_, d in kept_outputs(prog)][:2] == [1, 0]
    # a compiled pair that did not finish: its last calls are not the protocol's pair
    broken = {**sent, "timing": {"input_draws": 2}, "timing_compile_error": "RuntimeError"}
    assert [d for *_, d in kept_outputs(broken)] == [0, 1, 1]
    assert kept_outputs_problem(two) is None
    dropped = {k: v for k, v in two.items() if not k.startswith("timed_previous")}
    assert "the timed call before the last" in kept_outputs_problem(dropped)
    assert kept_outputs_problem({k: v for k, v in one.items() if k != "timed_previous"}) is None


def _run_phases(phases: list[str], draws: list[int]) -> list:
    """``keeping_timed``'s kept list after one call per entry; call ``i`` returns ``i``
    and saw ``draws[i]`` in ``phases[i]``."""
    kept: list = []
    i = [0]

    def fn() -> int:
        return i[0]

    call = keeping_timed(fn, kept, lambda a, k: draws[i[0]], lambda: phases[i[0]])
    for i[0] in range(len(phases)):
        call()
    return kept


def test_the_device_timed_pair_is_two_consecutive_device_calls_on_different_draws() -> None:
    """Among the device-timed calls (``phase_of() == "device"``), one pair of consecutive
    calls whose draws differ, drawn uniformly among all such pairs; calls of the other
    phases neither form pairs nor break into one."""
    phases = ["other"] * 2 + ["device"] * 6 + ["host"] * 4 + ["other"] * 2
    draws = [0, 0, 0, 1, 1, 0, 1, 1, 0, 1, 0, 1, 0, 1]
    # device calls are 2..7 with draws 0 1 1 0 1 1: pairs differ at (2,3), (4,5), (5,6)
    seen: Counter[tuple[int, int]] = Counter()
    for _ in range(3000):
        kept = _run_phases(phases, draws)
        (a, da), (b, db) = kept[2], kept[3]
        assert (b, da != db, phases[a], phases[b]) == (a + 1, True, "device", "device")
        seen[(a, b)] += 1
    assert set(seen) == {(2, 3), (4, 5), (5, 6)}
    assert all(850 < c < 1150 for c in seen.values()), seen  # 1000 each, sd ~26


def test_a_pair_labelled_with_one_draw_is_a_problem() -> None:
    from opbench.judge.timed_output import kept_outputs_problem

    ok = {"timed_pair_first": 1, "timed_pair_first_draw": 1, "timed_pair_second": 2,
          "timed_pair_second_draw": 0}  # fmt: skip
    assert kept_outputs_problem(ok) is None
    assert "two different" in kept_outputs_problem({**ok, "timed_pair_second_draw": 1})


def test_the_pair_and_the_sample_go_only_while_the_message_has_room() -> None:
    """A program's outputs can be GiBs and a worker message is capped: the last two calls'
    outputs always go, the device-timed pair (both or neither) and the sample only while
    they fit, so a problem that ran with two kept outputs before still runs."""
    from opbench.instrument.timed import output_bytes

    t = [(torch.full((4,), float(i)), i % 2) for i in range(5)]  # 16 bytes each
    kept = [t[0], t[1], t[2], t[3], t[4]]
    assert output_bytes(t[0][0]) == 16
    assert "timed_sample" in timed_outputs(kept, "cpu")  # no room given: everything goes
    full = [k for k in timed_outputs(kept, "cpu", room=80) if not k.endswith(("meta", "draw"))]
    assert full == ["timed_output", "timed_previous", "timed_pair_first", "timed_pair_second",
                    "timed_sample"]  # fmt: skip
    no_sample = timed_outputs(kept, "cpu", room=64)
    assert "timed_pair_second" in no_sample and "timed_sample" not in no_sample
    tight = timed_outputs(kept, "cpu", room=48)  # room for the last two and the sample
    assert "timed_pair_first" not in tight and "timed_pair_second" not in tight
    assert "timed_sample" in tight
    assert {"timed_output", "timed_previous"} <= set(timed_outputs(kept, "cpu", room=0))
