"""Calling a kernel the way a model on opbench's C++ gate calls it, in the WORKER.

Why: a kernel that declares a native launch (:class:`~opbench.backends.native.spec.NativeSpec`)
runs in a model without entering Python: the gate (``gate.cpp``) reads the call, allocates
the output and launches the compiled kernel in C++, at eager's host cost. Judged through
its Python function instead, the same kernel paid 10-20 us of Python a call that no model
on the gate pays (an H200's eager ``hardsigmoid`` read 20.8 us host-inclusive in the judged
loop, the Python function 39.1 at the same device time), so its host number said what
Python costs, not what the kernel costs a model.

How: the kernel is registered under :data:`~opbench.spec.reference.CANDIDATE_NAMESPACE`
with the judged overload's own schema (``opbench_candidate::add.Tensor``), with a gate in
front that serves every call (no policy). The reference's ``aten`` overload is untouched,
so both sides are called as ``OpOverload`` objects through the same dispatcher, and the
judge's wrapper costs them alike. A call the gate cannot launch (a transposed operand,
mixed dtypes, a misaligned view) reaches the Python function through the dispatcher, which costs more
than calling it directly; so the worker runs the trials through the gate, reads the gate's
counts, and times the gate only for a test whose every trial call was launched natively
(:func:`timed_route`). Either way the calls that are timed and judged late go through the
same path as the trials that were judged.

Only on CUDA (the gate launches nothing elsewhere). ``opbench run --python-calls`` (or
``OPBENCH_NATIVE=0``) turns this off: every kernel is then called as its Python function.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from opbench.backends.native.build import dtype_of_code, gate_module, unavailable_reason
from opbench.backends.native.gates import arm_native, arm_replay, dispatcher_name, new_gate
from opbench.backends.native.numbers import has_numbers, rewrapped
from opbench.backends.native.replay import replay_loader
from opbench.backends.native.spec import NativeSpec
from opbench.spec.ops import get_overload
from opbench.spec.reference import CANDIDATE_NAMESPACE, candidate_twin

__all__ = [
    "NativeCalls",
    "NativeRoute",
    "after_timing",
    "foreign_kernels",
    "judge_with_route",
    "timed_route",
]

log = logging.getLogger(__name__)


@dataclass
class NativeRoute:
    """One judged overload registered behind a gate: ``call`` is its ``OpOverload``."""

    op: str
    call: Any
    gate: Any
    #: the gate replays the kernel's launches (``opbench_replay``): a call signature is
    #: recorded on its first calls (:meth:`prime`) and launched from C++ after
    replays: bool = False

    def entry(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Callable[..., Any]:
        """What a test's calls go through: :attr:`call`, or, where the test passes a
        Python number for a Tensor argument (``mul.Tensor(x, 0.125)``), :attr:`call`
        with each such number made the wrapped-number tensor that aten's own entry makes
        of it, which is what the gate receives when a model computes ``x * 0.125``. A
        custom operator's Python entry refuses a number there, and this conversion is
        what aten does in C++ on every call, so it is done on every call here too."""
        call = self.call
        if not has_numbers(call, args, kwargs):
            return call

        def with_numbers(*a: Any, **k: Any) -> Any:
            a, k = rewrapped(call, a, k)
            return call(*a, **k)

        return with_numbers

    def launches_natively(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        """Whether the gate would launch this call in C++ (through :meth:`entry`): a dry
        call that reads the arguments and runs nothing (no kernel code, no compile, no
        launch)."""
        self.gate.set_dry(True)
        try:
            self.entry(args, kwargs)(*args, **kwargs)
        except (RuntimeError, TypeError):
            # arguments only aten's own overloads take (a number past int64, a complex
            # number for a Tensor argument)
            return False
        finally:
            self.gate.set_dry(False)
        return bool(self.gate.dry_native())

    def prime(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        """Record this call's launches for replay: the call is made through the gate (on
        the probe's own tensors) until the gate has two recordings that agree, at most
        :data:`PRIME_CALLS` times; True once the gate replays it. A call that raises is
        left to the trials, which see the same error."""
        for _ in range(PRIME_CALLS):
            if self.launches_natively(args, kwargs):
                return True
            try:
                self.entry(args, kwargs)(*args, **kwargs)
            except Exception:  # the trials report it
                return False
        return self.launches_natively(args, kwargs)

    def replay_refusal(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        """Why the gate does not replay this call: the recorder's reason for refusing
        its signature ("" where it was not refused)."""
        self.launches_natively(args, kwargs)
        return str(self.gate.dry_replay_why())

    def counts(self) -> dict[str, int]:
        """The gate's ``native`` (of them ``replayed``) and ``python`` calls since the
        last :meth:`reset`."""
        c = self.gate.counts()
        return {
            "native": int(c["native"]),
            "python": int(c["python"]),
            "replayed": int(c.get("replayed", 0)),
        }

    def trials_were_native(self) -> bool:
        """Every call since the last :meth:`reset` was launched in C++. A call that
        reached the Python function through the gate was seen by the worker's observers
        as one call of the gate, not as the calls the function made, so such a test is
        judged again on the function itself."""
        return timed_route(self.counts()) == "native"

    def describe(self, gated: bool) -> dict[str, Any]:
        """What the worker reports: the route its judged and timed calls took."""
        if gated:
            return {"route": "native", "op": candidate_twin(self.op), "replay": self.replays}
        foreign = self.foreign()
        why = (
            f"a kernel was registered on the twin while judged: {foreign[0]}"
            if foreign
            else f"a trial call reached the Python function through the gate ({self.counts()})"
        )
        return {"route": "python", "why": f"{why}; judged and timed as the Python function"}

    def reset(self) -> None:
        self.gate.reset_counts()

    def foreign(self) -> list[str]:
        """Kernels on the twin that neither PyTorch nor this worker registered
        (:func:`foreign_kernels`): checked after registering, after the trials and after
        timing."""
        return foreign_kernels(self.call.name())


#: calls that record a signature for replay before the trials (two must agree; a first
#: call that compiles or tunes launches more than the next)
PRIME_CALLS = 4

#: where the twin's own kernels are registered: the gate, and the definition's Python kernel
_OURS = ("opbench/backends/native/gate.cpp", "opbench/instrument/native_calls.py")
#: PyTorch's C++ sources, which register kernels for every operator (autograd's for a
#: custom one, say)
_PYTORCH = ("aten/src/ATen/", "torch/csrc/")


def foreign_kernels(qualname: str) -> list[str]:
    """The lines of ``qualname``'s dispatch table registered by anyone but PyTorch's C++
    and this worker. PyTorch accepts a kernel for an operator before the operator is
    defined, so code that read this module could put one on the twin (on an autograd key,
    say) that runs in front of the gate, does the work with PyTorch and hides those calls
    under the twin's, where the observers count only the twin: a route with such a line
    is not used, and one that gains it while judged or timed is reported."""
    table = torch._C._dispatch_dump_table(qualname)
    return [
        line.strip()
        for line in table.splitlines()
        if line.strip()
        # a key's fallback serves every operator alike (aten's too): not the twin's own
        and not line.rstrip().endswith("[backend fallback]")
        and not any(s in line for s in _OURS + _PYTORCH)
    ]


def timed_route(counts: dict[str, int]) -> str:
    """``native`` when every call the trials made through the gate was launched in C++,
    else ``python`` (the Python function is then timed, called directly)."""
    native, python = int(counts.get("native", 0)), int(counts.get("python", 0))
    return "native" if native > 0 and python == 0 else "python"


class NativeCalls:
    """The gated registrations of one worker: at most one per overload, made on first use.

    ``key`` is the dispatch key the gate serves: ``CUDA`` in a run (tests use ``CPU``,
    where the gate hands every call to the Python function, so the registration and the
    counts can be checked without a GPU). :attr:`notes` says, per overload, why it has no
    route where a kernel declares one.
    """

    def __init__(self, key: str = "CUDA") -> None:
        self.key = key
        self.notes: dict[str, str] = {}
        self._routes: dict[str, NativeRoute | None] = {}
        self._lib: torch.library.Library | None = None

    @classmethod
    def loaded(cls, key: str = "CUDA") -> NativeCalls:
        """Registrations on ``key``, the gate loaded now (a worker calls this before it
        fingerprints itself and before candidate code is imported). Where the gate cannot
        be had (``OPBENCH_NATIVE=0``, no compiler) no kernel gets a route, and
        :attr:`notes` says why for each that declares one."""
        gate_module()
        return cls(key)

    def route(self, op: str, kernel: Any) -> NativeRoute | None:
        """The gated twin of ``kernel`` for ``op``, or None (no native declaration for
        ``op``, no gate module, or the name was taken)."""
        if op not in self._routes:
            self._routes[op] = self._register(op, kernel)
        return self._routes[op]

    def _register(self, op: str, kernel: Any) -> NativeRoute | None:
        try:
            spec = NativeSpec.of(kernel, op)
        except ValueError as e:  # a malformed declaration: the Python function is judged
            self.notes[op] = str(e)
            return None
        loader = replay_loader(kernel, self.key)
        replays = loader is not None
        if spec is None and not replays:
            return None
        module = gate_module()
        if module is None:
            self.notes[op] = unavailable_reason() or "the C++ gate is not available"
            return None
        if self._lib is None:
            self._lib = torch.library.Library(CANDIDATE_NAMESPACE, "FRAGMENT")
        schema = str(get_overload(op)._schema).removeprefix("aten::")
        try:
            self._lib.define(schema)
        except RuntimeError as e:  # defined already: not by this worker, so not trusted
            self.notes[op] = f"{candidate_twin(op)} exists already ({e}); not gated"
            return None
        gate = new_gate(module, CANDIDATE_NAMESPACE, op, self.key)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="(?s).*registered")
            self._lib.impl(dispatcher_name(op), kernel, self.key)
        # the gate's "eager" is the kernel too: no policy here declines a call
        gate.capture_eager()
        gate.set_policy("python", "all", {}, True)
        gate.set_policy("native", "all", {}, True)
        if spec is not None:
            arm_native(gate, op, spec, dtype_of_code())
        if loader is not None:
            arm_replay(gate, dtype_of_code(), loader)
        gate.install(dispatcher_name(op))
        name, _, overload = op.partition(".")
        packet = getattr(getattr(torch.ops, CANDIDATE_NAMESPACE), name)
        route = NativeRoute(op, getattr(packet, overload or "default"), gate, replays)
        foreign = route.foreign()
        if foreign:
            self.notes[op] = f"another kernel is registered on the twin: {foreign[0]}; not gated"
            gate.close()
            return None
        return route

    def drop(self, op: str) -> None:
        """No route for ``op`` from now on (its gate removed)."""
        route = self._routes.get(op)
        if route is not None:
            route.gate.close()
        self._routes[op] = None

    def close(self) -> None:
        """Remove every gate, then the registrations (the gates hold the kernels below)."""
        for route in self._routes.values():
            if route is not None:
                route.gate.close()
        self._routes.clear()
        if self._lib is not None:
            self._lib._destroy()
            self._lib = None


def judge_with_route(
    native: NativeCalls | None,
    route: NativeRoute | None,
    op: str,
    kernel: Any,
    judge: Callable[[Any], Any],
    probe_args: Callable[[], tuple[tuple[Any, ...], dict[str, Any]]],
) -> tuple[Any, Any, dict[str, Any] | None]:
    """One test's trials, through the gate where it launches the call: ``(report, the
    callable to time, what to report of the route)``.

    ``judge(fn)`` runs the trials on ``fn`` and returns the report; ``probe_args()`` builds
    the case's inputs for the dry call. The twin is used only while its dispatch table is
    clean (:func:`foreign_kernels`) and the dry call says the gate launches the call; a
    test whose trials reached the Python function through the gate, or during which a
    kernel was put on the twin, is judged again on ``kernel`` itself."""
    foreign = route.foreign() if native is not None and route is not None else []
    if foreign:
        # put there since the route was made: never call through it again
        native.notes[op] = f"another kernel on the twin: {foreign[0]}"
        native.drop(op)
        route = None
    probe = probe_args() if route is not None else None
    if route is not None and probe is not None and route.replays:
        route.prime(*probe)
    if route is not None and probe is not None and route.launches_natively(*probe):
        entry = route.entry(*probe)
        route.reset()
        report = judge(entry)
        gated = route.trials_were_native() and not route.foreign()
        if not gated:  # the observers saw only the gate: judge the function itself
            report = judge(kernel)
        return report, (entry if gated else kernel), route.describe(gated)
    report = judge(kernel)
    if native is not None and op in native.notes:  # declared, and no gate for it: say why
        return report, kernel, {"route": "python", "why": native.notes[op]}
    refused = (
        route.replay_refusal(*probe) if route is not None and probe is not None and route.replays
        else ""
    )  # fmt: skip
    if refused:
        return report, kernel, {"route": "python", "why": f"not replayed: {refused}"}
    return report, kernel, None


def after_timing(route: NativeRoute, out: dict[str, Any]) -> None:
    """Add the gate's counts over the test to ``out["call_route"]``, and a tampering line
    when a kernel was put on the twin while it was judged or timed."""
    out.setdefault("call_route", route.describe(True))["counts"] = route.counts()
    foreign = route.foreign()
    if foreign and out.get("timing") is not None:
        out["timing_tamper"] = [
            *(out.get("timing_tamper") or []),
            f"a kernel was registered on {route.call.name()} while it was timed: {foreign[0]}",
        ]
