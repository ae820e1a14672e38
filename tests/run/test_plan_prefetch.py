"""The executor plans the next test on a harness thread while the worker runs this one
(without timing only), and never hands a test another test's plan."""

from __future__ import annotations

import threading

from opbench.run.plan_ahead import PlansAhead
from opbench.suites.case import Case

A = Case(op="relu.default", args="((T([4], f32),), {})", suite="t", seed=1)
B = Case(op="relu.default", args="((T([4], f32),), {})", suite="t", seed=2)
C = Case(op="neg.default", args="((T([4], f32),), {})", suite="t", seed=3)


def _recording() -> tuple[list[tuple[str, str]], object]:
    calls: list[tuple[str, str]] = []

    def compute(case: Case) -> str:
        calls.append((case.test_id, threading.current_thread().name))
        return f"plan of {case.test_id}"

    return calls, compute


def test_the_next_plan_is_computed_ahead_on_another_thread_and_matched_by_test() -> None:
    calls, compute = _recording()
    plans = PlansAhead(compute, "cpu", ahead=True)
    try:
        assert plans.get(A) == f"plan of {A.test_id}"
        plans.ahead(B)
        assert plans.get(B) == f"plan of {B.test_id}"
        plans.ahead(B)
        assert plans.get(C) == f"plan of {C.test_id}"  # not B's plan
    finally:
        plans.close()
    threads = dict(calls)
    assert threads[A.test_id] == threading.current_thread().name
    assert threads[B.test_id].startswith("opbench-plan")


def test_without_ahead_everything_is_planned_in_the_calling_thread() -> None:
    calls, compute = _recording()
    plans = PlansAhead(compute, "cpu", ahead=False)
    plans.ahead(B)
    assert plans.get(B) == f"plan of {B.test_id}"
    plans.close()
    assert calls == [(B.test_id, threading.current_thread().name)]


def test_deeper_planning_plans_the_next_tests_at_once_and_drops_a_window_left(monkeypatch):
    """``OPBENCH_PLAN_AHEAD=2``: two tests planned at once on two threads; asking for a
    test outside the window drops what was planned for the window."""
    monkeypatch.setenv("OPBENCH_PLAN_AHEAD", "2")
    both = threading.Barrier(2, timeout=10)  # passes only if two plans run at once
    calls: list[str] = []

    def compute(case: Case) -> str:
        calls.append(case.test_id)
        if case in (A, B) and calls.count(case.test_id) == 1:
            both.wait()
        return f"plan of {case.test_id}"

    plans = PlansAhead(compute, "cpu", ahead=True)
    try:
        assert plans.depth == 2
        plans.ahead([A, B, C])  # C is beyond the window
        assert plans.get(B) == f"plan of {B.test_id}"
        assert plans.get(A) == f"plan of {A.test_id}"
        assert C.test_id not in calls
        plans.ahead([B])  # planned again for a window the run then leaves
        assert plans.get(C) == f"plan of {C.test_id}"  # computed now
        assert plans.get(B) == f"plan of {B.test_id}" and calls.count(B.test_id) >= 2
    finally:
        plans.close()


def test_a_bad_plan_depth_is_a_clear_error(monkeypatch):
    import pytest

    monkeypatch.setenv("OPBENCH_PLAN_AHEAD", "two")
    with pytest.raises(ValueError, match="OPBENCH_PLAN_AHEAD"):
        PlansAhead(lambda c: None, "cpu", ahead=True)
