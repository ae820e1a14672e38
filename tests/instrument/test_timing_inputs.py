"""The inputs a timed pair runs on (``instrument/timing_inputs.py``): two draws of a case
rewritten into the same tensors, copies for host rounds and writers, and which draw each
call held. Checked against the draws' own values, on the CPU."""

from __future__ import annotations

import pytest
import torch

from opbench.instrument.timing import TimingOptions, time_pair
from opbench.instrument.timing_inputs import TimingInputs, draw_mismatch


def _draw(seed: int) -> tuple[list, dict]:
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(6, 4, generator=g)
    # a transposed view and a stride-0 expanded row share the layout rules of real cases
    return [base.t(), torch.randn(6, generator=g).expand(4, 6)], {"alpha": 2}


def test_a_draw_change_rewrites_the_same_tensors_without_bumping_versions() -> None:
    a, b = _draw(0), _draw(1)
    inputs = TimingInputs(a, mutating=False, make_alternate=lambda: b)
    assert len(inputs.draws) == 2 and inputs.note is None
    x, y = inputs.working[0]
    ids = (id(x), id(y), x.data_ptr(), y.data_ptr(), x._version, y._version)
    for k in (1, 0, 1):
        args, kwargs = inputs.holding(k)
        assert args is inputs.working[0] and kwargs == {"alpha": 2}
        assert (id(x), id(y), x.data_ptr(), y.data_ptr(), x._version, y._version) == ids
        want = (b if k else a)[0]
        assert torch.equal(x, want[0]) and torch.equal(y, want[1])
        assert y.stride() == (0, 1)  # still expanded: its one row was rewritten
        assert inputs.draw_of(args, kwargs) == k
    assert not inputs.became_dirty()


def test_random_repetitions_use_both_draws_and_host_pools_are_all_new_objects() -> None:
    inputs = TimingInputs(_draw(0), mutating=False, make_alternate=lambda: _draw(1))
    seen = {inputs.draw_of(*inputs.for_rep()) for _ in range(64)}
    assert seen == {0, 1}  # 2**-63 to fail by chance
    pool = inputs.pool(20)
    firsts = [args[0] for args, _ in pool]
    assert len({id(t) for t in firsts}) == 20
    assert len({t.data_ptr() for t in firsts}) == 20  # all alive: no address repeats
    for args, kwargs in pool:
        k = inputs.draw_of(args, kwargs)
        assert torch.equal(args[0], inputs.draws[k][0][0])
        assert args[0].stride() == inputs.draws[k][0][0].stride()


def test_writers_get_a_fresh_copy_of_the_chosen_draw() -> None:
    inputs = TimingInputs(_draw(0), mutating=True, make_alternate=lambda: _draw(1))
    one, _ = inputs.holding(1)
    two, _ = inputs.holding(1)
    assert one[0] is not two[0]
    assert torch.equal(one[0], inputs.draws[1][0][0])
    one[0].zero_()  # a writer's changes stay in its copy
    assert not torch.equal(inputs.holding(1)[0][0], one[0])


def test_draws_that_cannot_share_tensors_leave_one_draw_and_say_why() -> None:
    a = ([torch.randn(3, 4)], {})
    assert draw_mismatch(a, ([torch.randn(4, 3)], {})) is not None  # another shape
    assert draw_mismatch(a, ([torch.randn(3, 4)], {"dim": 1})) is not None  # another argument
    assert draw_mismatch(a, ([torch.randn(3, 4).t().contiguous().t()], {})) is not None
    inputs = TimingInputs(a, mutating=False, make_alternate=lambda: ([torch.randn(4, 3)], {}))
    assert len(inputs.draws) == 1 and "differs" in (inputs.note or "")
    assert all(inputs.draw_of(*inputs.for_rep()) == 0 for _ in range(8))


def test_time_pair_ends_on_the_other_draw_in_the_same_tensors() -> None:
    """What a remembering kernel relies on is gone: the candidate's last two calls hold
    draw 0 then draw 1 in the very same tensor (object, address, version)."""
    calls: list[tuple[int, int, int, float]] = []

    def cand(x, y):
        calls.append((id(x), x.data_ptr(), x._version, float(x.sum())))
        return torch.mul(x, y)

    a = ([torch.randn(32, 32), torch.randn(32, 32)], {})
    b = ([torch.randn(32, 32), torch.randn(32, 32)], {})
    opts = TimingOptions(warmup_ms=1, min_reps=8, max_reps=16, budget_ms=5, host_budget_ms=2)
    timing = time_pair(torch.mul, cand, lambda: a, "cpu", opts, alternate_args=lambda: b)
    assert timing.input_draws == 2 and timing.input_draws_note is None
    (i0, p0, v0, s0), (i1, p1, v1, s1) = calls[-2:]
    assert (i0, p0, v0) == (i1, p1, v1)
    assert s0 == float(a[0][0].sum()) and s1 == float(b[0][0].sum())


@pytest.mark.parametrize("stored_draw", [0, 1])
def test_an_answer_stored_for_the_working_tensors_fails_a_kept_call(stored_draw: int) -> None:
    """Whichever draw a kernel stored its answer for (on the H100 the side-stream check
    recomputes on the working tensors at a random draw just before the last two calls),
    one of the kept last two calls gets the other draw's answer: judging only the last
    call passed both remembering kernels of the adversarial corpus there."""
    from opbench.instrument.timed import keeping_timed, timed_outputs
    from opbench.judge.timed_output import kept_outputs

    a = ([torch.randn(32, 32), torch.randn(32, 32)], {})
    b = ([torch.randn(32, 32), torch.randn(32, 32)], {})
    draws = [a, b]

    def remembering(x, y):  # on the working tensors, always ``stored_draw``'s answer
        if made and x is made[0].working[0][0]:
            return torch.minimum(*draws[stored_draw][0])
        return torch.minimum(x, y)

    kept: list = []
    made: list = []
    cand = keeping_timed(remembering, kept, lambda ar, kw: made[0].draw_of(ar, kw))
    opts = TimingOptions(warmup_ms=1, min_reps=8, max_reps=16, budget_ms=5, host_budget_ms=2)
    time_pair(torch.minimum, cand, lambda: a, "cpu", opts, alternate_args=lambda: b,
              inputs_ready=made.append)  # fmt: skip
    sent = kept_outputs(timed_outputs(kept, "cpu"))
    assert [w for w, *_ in sent[:2]] == ["the last timed call", "the timed call before the last"]
    assert [d for *_, d in sent[:2]] == [1, 0]
    wrong = [w for w, out, _, d in sent if not torch.equal(out, torch.minimum(*draws[d][0]))]
    caught_by = ["the last timed call", "the timed call before the last"][stored_draw]
    assert caught_by in wrong and set(wrong) <= {caught_by, "a timed call drawn at random"}


def test_inputs_over_the_size_cap_get_one_draw() -> None:
    opts = TimingOptions(
        warmup_ms=1, min_reps=8, max_reps=8, budget_ms=2, host_budget_ms=1, alternate_max_bytes=64
    )
    made = []

    def second():
        made.append(1)
        return [torch.randn(32)], {}

    timing = time_pair(torch.neg, torch.neg, lambda: ([torch.randn(32)], {}), "cpu", opts,
                       alternate_args=second)  # fmt: skip
    assert timing.input_draws == 1 and "over 64" in timing.input_draws_note
    assert not made  # the second draw is never built
