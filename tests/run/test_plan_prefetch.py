"""The executor plans the next test on a harness thread while the worker runs this one
(without timing only), and never hands a test another test's plan."""

from __future__ import annotations

import threading

from opbench.run.executor import _Plans
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
    plans = _Plans(compute, "cpu", ahead=True)
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
    plans = _Plans(compute, "cpu", ahead=False)
    plans.ahead(B)
    assert plans.get(B) == f"plan of {B.test_id}"
    plans.close()
    assert calls == [(B.test_id, threading.current_thread().name)]
