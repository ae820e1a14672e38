"""The worker's gated calls (``opbench.instrument.native_calls``) on the CPU: the kernel is
registered beside ``aten`` under its own namespace, the gate in front of it hands every
CPU call to the Python function and counts it, a dry call runs nothing, and nothing the
registration does looks like tampering to the worker's fingerprint. The guard allows the
judged kernel's own twin and nothing else of that namespace.

The native launch itself needs CUDA: ``tests/kernels/test_native_launch.py`` judges a run
through it on a GPU.

Slow: the first test builds the gate (about 20 s on 2 cores, cached after)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch

from opbench.backends.native import gate_module, unavailable_reason
from opbench.instrument.integrity import Fingerprint
from opbench.instrument.native_calls import (
    NativeCalls,
    NativeRoute,
    after_timing,
    judge_with_route,
    timed_route,
)
from opbench.instrument.observer import DispatchRecorder
from opbench.judge.guard import classify_calls
from opbench.run.outcome_verdict import call_route_details
from opbench.spec.reference import CANDIDATE_NAMESPACE, candidate_twin, is_candidate_twin

pytestmark = pytest.mark.slow

CALLS: list[str] = []


def _relu(x: torch.Tensor) -> torch.Tensor:
    CALLS.append("relu")
    return torch.clamp_min(x, 0)


_relu.opbench_native = {"overloads": ("relu.default",), "operands": 1, "compile": lambda *a: None}


def _add_(x: torch.Tensor, y: torch.Tensor, *, alpha: Any = 1) -> torch.Tensor:
    CALLS.append("add_")
    return x.add_(y, alpha=alpha)


_add_.opbench_native = {
    "overloads": ("add_.Tensor",),
    "operands": 2,
    "inplace": True,
    "param_args": (2, -1),
    "param_defaults": (1.0, 0.0),
    "compile": lambda *a: None,
}


@pytest.fixture
def native(monkeypatch: pytest.MonkeyPatch) -> Iterator[NativeCalls]:
    monkeypatch.setenv("OPBENCH_NATIVE", "1")
    if gate_module() is None:
        pytest.fail(f"the C++ gate did not build: {unavailable_reason()}")
    CALLS.clear()
    calls = NativeCalls("CPU")
    yield calls
    calls.close()


def test_the_twin_calls_the_python_function_and_counts_it(native: NativeCalls) -> None:
    route = native.route("relu.default", _relu)
    assert route is not None
    assert route.call.name() == f"{CANDIDATE_NAMESPACE}::relu"
    x = torch.randn(64)
    torch.testing.assert_close(route.call(x), torch.relu(x))
    assert CALLS == ["relu"]
    assert route.counts() == {"native": 0, "python": 1, "replayed": 0}
    assert not route.trials_were_native()  # a Python-path call: judged on the function
    assert torch.ops.aten.relu.default(x) is not None and CALLS == ["relu"]  # aten untouched
    assert native.route("relu.default", _relu) is route  # one registration per overload


def test_an_inplace_twin_returns_self_and_takes_keywords(native: NativeCalls) -> None:
    route = native.route("add_.Tensor", _add_)
    assert route is not None
    a, b = torch.zeros(8), torch.ones(8)
    out = route.call(a, b, alpha=2.5)
    assert out is a
    torch.testing.assert_close(a, torch.full((8,), 2.5))


def _mul(x: torch.Tensor, y: Any) -> torch.Tensor:
    CALLS.append(f"mul {type(y).__name__} {getattr(y, 'dtype', None)}")
    return torch.mul(x, y)


_mul.opbench_native = {
    "overloads": ("mul.Tensor",),
    "operands": 2,
    "compile": lambda *a: None,
}


@pytest.mark.parametrize(
    ("self_dtype", "number"),
    [(torch.float16, 0.125), (torch.int64, 0.5), (torch.int64, 3), (torch.float32, True)],
)
def test_a_number_for_a_tensor_argument_reaches_the_twin_as_aten_converts_it(
    native: NativeCalls, self_dtype: torch.dtype, number: Any
) -> None:
    """``mul.Tensor(x, 0.125)``: aten's entry makes the number a wrapped-number tensor (a
    model's ``x * 0.125`` reaches the gate so); the twin's own entry refuses a number, so
    the route's entry converts it the same way: the result and its dtype are aten's
    (int64 * 0.5 is float32, where a plain 0-dim float64 tensor would give float64), and
    the Python function behind the gate gets the number itself, as from aten's entry."""
    route = native.route("mul.Tensor", _mul)
    assert route is not None
    x = torch.arange(6).to(self_dtype)
    with pytest.raises(RuntimeError, match="Expected a value of type 'Tensor'"):
        route.call(x, number)
    entry = route.entry((x, number), {})
    assert entry is not route.call
    got, want = entry(x, number), torch.ops.aten.mul.Tensor(x, number)
    assert got.dtype == want.dtype
    torch.testing.assert_close(got, want)
    # the dispatcher hands a Python kernel the wrapped number back as the number
    assert CALLS == [f"mul {type(number).__name__} None"]
    assert route.launches_natively((x, number), {}) is False  # read, not refused: a CPU self
    assert route.entry((x, torch.ones(6, dtype=self_dtype)), {}) is route.call


def test_a_number_survives_the_trials_dispatch_recorder(native: NativeCalls) -> None:
    """The trials run under a ``TorchDispatchMode`` (the recorder), which receives the
    wrapped number unwrapped: the recorder hands the twin a wrapped number again, so the
    call neither fails nor changes dtype (the H200 run at 9cba602 judged
    ``mul.Tensor(x, 0.125)`` as the Python function: the twin refused the number there)."""
    route = native.route("mul.Tensor", _mul)
    assert route is not None
    x = torch.arange(6)
    entry = route.entry((x, 0.5), {})
    with DispatchRecorder() as recorder:
        got = entry(x, 0.5)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, torch.ops.aten.mul.Tensor(x, 0.5))
    assert [c.name for c in recorder.calls][0] == f"{CANDIDATE_NAMESPACE}::mul.Tensor"
    assert route.counts() == {
        "native": 0,
        "python": 1,
        "replayed": 0,
    }  # through the gate (CPU: Python)


def test_a_judged_test_with_a_number_goes_through_the_entry(native: NativeCalls) -> None:
    route = native.route("mul.Tensor", _mul)
    assert route is not None
    x = torch.randn(8)
    seen: list[Any] = []

    def judge(fn: Any) -> str:
        seen.append(fn)
        fn(x, 0.25)
        return "report"

    # on the CPU the gate never launches: judged on the function, which got the number
    report, timed, call_route = judge_with_route(
        native, route, "mul.Tensor", _mul, judge, lambda: ((x, 0.25), {})
    )
    assert (report, timed, call_route) == ("report", _mul, None)
    assert seen == [_mul]


def test_a_dry_call_runs_nothing(native: NativeCalls) -> None:
    route = native.route("relu.default", _relu)
    assert route is not None
    x = torch.randn(16)
    before = x.clone()
    assert route.launches_natively((x,), {}) is False  # a CPU tensor: never launched in C++
    assert CALLS == []
    assert route.counts() == {"native": 0, "python": 0, "replayed": 0}
    assert torch.equal(x, before)
    route.call(x)  # and the gate is live again after the dry call
    assert CALLS == ["relu"]


def test_only_declared_overloads_are_routed(native: NativeCalls) -> None:
    assert native.route("relu_.default", _relu) is None  # declared for relu.default only
    assert native.route("neg.default", lambda x: -x) is None  # no declaration
    bad = lambda x: x  # noqa: E731
    bad.opbench_native = {"overloads": ("sigmoid.default",), "operands": 3, "compile": len}
    assert native.route("sigmoid.default", bad) is None
    assert "not a valid native spec" in native.notes["sigmoid.default"]


def test_a_name_taken_before_the_worker_is_not_trusted(native: NativeCalls) -> None:
    squatter = torch.library.Library(CANDIDATE_NAMESPACE, "FRAGMENT")
    try:
        squatter.define(str(torch.ops.aten.relu.default._schema).removeprefix("aten::"))
        assert native.route("relu.default", _relu) is None
        assert "exists already" in native.notes["relu.default"]
    finally:
        squatter._destroy()


def test_registering_and_calling_is_not_tampering(native: NativeCalls) -> None:
    fingerprint = Fingerprint()  # as a worker takes it: the gate loaded, no route yet
    route = native.route("relu.default", _relu)
    assert route is not None
    route.launches_natively((torch.randn(4),), {})
    route.call(torch.randn(4))
    assert fingerprint.changes() == []


def test_replacing_the_gates_own_functions_is_tampering(native: NativeCalls) -> None:
    """The worker reads a twin's route through the gate (``Gate.counts``: a candidate
    that made it report every call native would have its Python function's PyTorch calls
    hidden under the twin) and makes the twin's wrapped numbers with it; the extension is
    no opbench module, so the fingerprint holds its functions apart."""
    module = gate_module()
    assert module is not None
    fingerprint = Fingerprint()
    for owner, name, fake in (
        (module.Gate, "counts", lambda self: {"native": 1, "python": 0}),
        (module.Gate, "dry_native", lambda self: True),
        (module, "wrapped_number", lambda v: v),
    ):
        saved = getattr(owner, name)
        try:
            setattr(owner, name, fake)
            lines = fingerprint.changes()
            assert any(name in x and "replaced" in x for x in lines), (name, lines)
        finally:
            setattr(owner, name, saved)
    assert fingerprint.changes() == []


def test_a_workers_fingerprint_takes_in_a_gate_loaded_after_the_template(
    native: NativeCalls, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fork-server template fingerprints itself before any worker loads the gate;
    a worker that loads it then inherits that fingerprint, with the gate's functions
    added, so a replacement is still named."""
    import opbench.instrument.integrity as integrity

    module = gate_module()
    assert module is not None
    monkeypatch.setattr(integrity, "loaded_module", lambda: None)
    template = Fingerprint()  # as the template takes it: no gate loaded yet
    assert not any(k.startswith("gate") for k in template._taken)
    monkeypatch.setattr(integrity, "loaded_module", lambda: module)
    fingerprint = Fingerprint.inherited(template)
    assert fingerprint.changes() == []
    saved = module.Gate.counts
    try:
        module.Gate.counts = lambda self: {"native": 1, "python": 0}
        assert "gate.Gate.counts was replaced" in fingerprint.changes()
    finally:
        module.Gate.counts = saved


def test_the_guard_allows_the_judged_kernels_own_twin_only() -> None:
    assert is_candidate_twin("opbench_candidate::add.Tensor", "add.Tensor")
    assert is_candidate_twin("opbench_candidate::add", "add.Tensor")  # the observer's name
    assert is_candidate_twin(candidate_twin("relu.default"), "relu.default")
    assert not is_candidate_twin("opbench_candidate::mul.Tensor", "add.Tensor")
    assert not is_candidate_twin("aten::add.Tensor", "add.Tensor")
    assert not is_candidate_twin("mylib::add.Tensor", "add.Tensor")
    assert classify_calls("add.Tensor", [("opbench_candidate::add.Tensor", False)]).ok
    bad = classify_calls("add.Tensor", [("opbench_candidate::mul.Tensor", False)])
    assert bad.violations == {"opbench_candidate::mul.Tensor": 1}
    assert not classify_calls("add.Tensor", [("add.Tensor", False)]).ok


def test_the_route_a_test_is_timed_on() -> None:
    assert timed_route({"native": 4, "python": 0}) == "native"
    assert timed_route({"native": 4, "python": 1}) == "python"
    assert timed_route({"native": 0, "python": 0}) == "python"


def test_the_harness_keeps_only_plain_route_details() -> None:
    sent = {"route": "native", "op": "opbench_candidate::relu", "counts": {"native": 9, "x": 1}}
    assert call_route_details(sent) == {
        "call_route": {"route": "native", "op": "opbench_candidate::relu", "counts": {"native": 9}}
    }
    assert call_route_details({"route": "fast"}) == {}
    assert call_route_details("native") == {}
    assert call_route_details(None) == {}


def test_a_number_where_the_schema_says_tensor_is_not_routed(native: NativeCalls) -> None:
    """PyTorch turns ``mul.Tensor(x, 0.125)``'s number into a tensor for ``aten`` only:
    the twin refuses it, so the call stays with the Python function."""
    kernel = lambda x, y: x * y  # noqa: E731
    kernel.opbench_native = {"overloads": ("mul.Tensor",), "operands": 2, "compile": len}
    route = native.route("mul.Tensor", kernel)
    assert route is not None
    assert route.launches_natively((torch.randn(4), 0.125), {}) is False
    assert route.counts() == {"native": 0, "python": 0, "replayed": 0}


def test_the_timed_guard_allows_the_twin_too() -> None:
    from opbench.judge.guard import classify_timed

    observed = {"scoped": {"opbench_candidate::add": 40, "add": 1}, "other_threads": {}}
    assert classify_timed("add.Tensor", observed).violations == {"add": 1}


def test_without_the_gate_a_declared_kernel_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPBENCH_NATIVE", "0")
    calls = NativeCalls.loaded("CPU")
    assert calls.route("relu.default", _relu) is None
    assert "OPBENCH_NATIVE=0" in calls.notes["relu.default"]
    assert calls.route("neg.default", lambda x: -x) is None  # nothing declared: no note
    assert "neg.default" not in calls.notes


def test_a_kernel_put_on_the_twin_before_it_is_defined_refuses_the_route(
    native: NativeCalls,
) -> None:
    """PyTorch takes a kernel for an operator before its definition: one on an autograd
    key would run in front of the gate and hide its PyTorch calls under the twin's."""
    squatter = torch.library.Library(CANDIDATE_NAMESPACE, "IMPL")
    try:
        squatter.impl("relu", lambda x: torch.relu(x), "AutogradCPU")
        assert native.route("relu.default", _relu) is None
        assert "another kernel is registered on the twin" in native.notes["relu.default"]
        assert "AutogradCPU" in native.notes["relu.default"]
    finally:
        squatter._destroy()


def test_a_kernel_put_on_the_twin_later_is_seen(native: NativeCalls) -> None:
    route = native.route("relu.default", _relu)
    assert route is not None and route.foreign() == []
    late = torch.library.Library(CANDIDATE_NAMESPACE, "IMPL")
    try:
        late.impl("relu", lambda x: torch.relu(x), "AutogradCPU")
        assert any("AutogradCPU" in line for line in route.foreign())
        assert "registered on the twin" in route.describe(False)["why"]
    finally:
        late._destroy()
    native.drop("relu.default")
    assert native.route("relu.default", _relu) is None


def _judge_on(x: torch.Tensor) -> Any:
    """A stand-in for the worker's trials: call the kernel, return what was called."""

    def judge(fn: Any) -> Any:
        fn(x)
        return fn

    return judge


def test_a_test_the_gate_does_not_launch_is_judged_on_the_function(native: NativeCalls) -> None:
    route = native.route("relu.default", _relu)
    x = torch.randn(8)
    report, timed, call_route = judge_with_route(
        native, route, "relu.default", _relu, _judge_on(x), lambda: ((x,), {})
    )
    assert report is _relu and timed is _relu and call_route is None  # CPU: never native
    assert route is not None and route.counts() == {"native": 0, "python": 0, "replayed": 0}


def test_trials_that_reached_python_through_the_gate_are_judged_again(
    native: NativeCalls, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dry call said native, but a trial call went to the Python function through the
    gate (a variant that failed to compile, say): the observers saw only the gate, so the
    trials run again on the function, which is also what is timed."""
    route = native.route("relu.default", _relu)
    assert route is not None
    monkeypatch.setattr(NativeRoute, "launches_natively", lambda self, args, kwargs: True)
    judged: list[Any] = []
    x = torch.randn(8)

    def judge(fn: Any) -> Any:
        judged.append(fn)
        return fn(x)

    report, timed, call_route = judge_with_route(
        native, route, "relu.default", _relu, judge, lambda: ((x,), {})
    )
    assert judged == [route.call, _relu] and timed is _relu
    torch.testing.assert_close(report, torch.relu(x))
    assert call_route["route"] == "python" and "reached the Python function" in call_route["why"]


def test_a_twin_that_gained_a_kernel_is_dropped(native: NativeCalls) -> None:
    route = native.route("relu.default", _relu)
    late = torch.library.Library(CANDIDATE_NAMESPACE, "IMPL")
    try:
        late.impl("relu", lambda x: torch.relu(x), "AutogradCPU")
        x = torch.randn(8)
        _, timed, call_route = judge_with_route(
            native, route, "relu.default", _relu, _judge_on(x), lambda: ((x,), {})
        )
        assert timed is _relu
        assert call_route["route"] == "python" and "AutogradCPU" in call_route["why"]
        assert native.route("relu.default", _relu) is None  # never again in this worker
    finally:
        late._destroy()


def test_after_timing_reports_the_counts_and_a_kernel_put_on_the_twin(
    native: NativeCalls,
) -> None:
    route = native.route("relu.default", _relu)
    assert route is not None
    route.call(torch.randn(4))
    out: dict[str, Any] = {"timing": {}, "timing_tamper": []}
    after_timing(route, out)
    assert out["call_route"]["counts"] == {"native": 0, "python": 1, "replayed": 0}
    assert out["timing_tamper"] == []
    late = torch.library.Library(CANDIDATE_NAMESPACE, "IMPL")
    try:
        late.impl("relu", lambda x: torch.relu(x), "AutogradCPU")
        after_timing(route, out)
        assert len(out["timing_tamper"]) == 1 and "while it was timed" in out["timing_tamper"][0]
    finally:
        late._destroy()
