"""How a run's cases are cut into chunks for the slots: small suites are cut finer so
the slots finish together, and the costliest tests go out first (longest processing time
first). On a 4 x H100 host the traces suite at one test per op (166 tests, aten: one
unit) went out in chunks of 32, and one slot ran 64 tests while the others ran 32-38."""

from __future__ import annotations

import heapq

from opbench.run.isolation import CHUNK, IsolationPlanner, case_cost, chunk_size, chunks
from opbench.spec.args import described_numel
from opbench.suites.case import Case


def _case(op: str, n: int, i: int) -> Case:
    return Case(op=op, args=f"((T([{n}, 4], f32), T([4], f32)), {{}})", seed=i, suite="t")


def _suite(count: int, ops: int | None = None) -> list[Case]:
    # sizes spread over four orders of magnitude, in suite (op) order, not by size; one
    # test an op (the traces suite at --limit-per-op 1) unless ``ops`` is given
    return [
        _case(f"op{i % (ops or count)}.default", 10 ** (2 + i % 5) * (1 + i % 3), i)
        for i in range(count)
    ]


def _makespan(items: list[list[Case]], slots: int) -> float:
    """Each slot takes the next chunk when it is free; a test lasts its cost."""
    free = [0.0] * slots
    for chunk in items:
        t = heapq.heappop(free)
        heapq.heappush(free, t + sum(map(case_cost, chunk)))
    return max(free)


def test_described_numel_sums_every_tensor() -> None:
    assert described_numel("((T([2, 3], f32), T([], f32), T([0, 5], f16)), {})") == 7
    assert described_numel("((1, 2), {'dim': 0})") == 0


def test_a_small_suite_gives_each_slot_several_chunks() -> None:
    cases = _suite(166)
    got = list(chunks(cases, IsolationPlanner("aten"), slots=4))
    assert len(got) >= 4 * 4 and max(len(c) for _, c in got) <= chunk_size(166, 4) == 11
    assert sorted(c.seed for _, chunk in got for c in chunk) == list(range(166))
    # a big suite goes out as before: suite order, whole chunks
    big = _suite(5310, ops=400)
    assert chunk_size(5310, 4) == CHUNK and chunk_size(166, 1) == CHUNK
    assert [c for _, chunk in chunks(big, IsolationPlanner("aten"), slots=4) for c in chunk] == big


def test_the_costliest_tests_go_out_first_and_the_slots_finish_together() -> None:
    cases = _suite(166)
    got = [chunk for _, chunk in chunks(cases, IsolationPlanner("aten"), slots=4)]
    assert max(map(case_cost, got[0])) == max(map(case_cost, cases))
    costs = [sum(map(case_cost, chunk)) for chunk in got]
    assert costs == sorted(costs, reverse=True)
    ideal = sum(map(case_cost, cases)) / 4
    before = [cases[i : i + CHUNK] for i in range(0, len(cases), CHUNK)]  # suite order, 32s
    # within 3% of an even split; in suite order and 32 a chunk, as before: 54% over
    assert _makespan(got, 4) < 1.03 * ideal < 1.1 * ideal < _makespan(before, 4)


def test_an_ops_tests_stay_in_one_chunk() -> None:
    # the crash budget counts an op's crashes in turn: an op's tests on two workers at
    # once made how many were left not run a race
    cases = _suite(120, ops=30)  # four tests an op
    got = [chunk for _, chunk in chunks(cases, IsolationPlanner("aten"), slots=2)]
    where = {c.op: {k for k, chunk in enumerate(got) for d in chunk if d.op == c.op} for c in cases}
    assert all(len(ks) == 1 for ks in where.values()), where
    assert len(got) >= 2 * 4 and sorted(c.seed for chunk in got for c in chunk) == list(range(120))


def test_a_units_chunks_stay_together(tmp_path) -> None:
    # a kernel folder backend: one unit per op folder; a slot keeps its worker while its
    # next chunk has the same unit, so each unit's chunks go out one after another
    for op in ("add__Tensor", "relu"):
        d = tmp_path / op
        d.mkdir()
        (d / f"{op}_implementation.py").write_text(f"def {op}_kernel_impl(*a):\n    pass\n")
    cases = [_case("add.Tensor", 10 ** (i % 4), i) for i in range(30)]
    cases += [_case("relu.default", 10**6, 100 + i) for i in range(30)]
    got = list(chunks(cases, IsolationPlanner(str(tmp_path)), slots=2))
    units = [u for u, _ in got]
    assert units[0] != units[-1] and len(set(units)) == 2
    switches = sum(1 for a, b in zip(units, units[1:]) if a != b)
    assert switches == 1 and "relu" in units[0][0]  # relu's inputs are the larger
