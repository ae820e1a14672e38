"""Registering a backend's kernels into PyTorch through ``torch.library`` (the only
global state in opbench).

``enable(backend, device)`` registers a wrapper for every served overload of a loaded
:class:`~opbench.backends.base.Backend` on the ``CPU`` or ``CUDA`` dispatch key of
``aten``, so unchanged models run on the backend; ``disable()`` and the ``backend(...)``
context manager remove the registrations for real (``Library._destroy()``), also when the
block raises. The public ``opbench.enable("my_kernels/")`` (:mod:`opbench.backends.api`)
loads a spec first; this module imports no loader, because loading a ``module:``
backend reaches back into it (:mod:`opbench.backends.module`).

Each wrapper:

* captures the original kernel first (``torch.library.get_kernel``), and routes a call of
  the same operator made from inside its own kernel to that original, so a kernel that
  calls the op it implements cannot recurse forever;
* falls back to the original when the kernel declines a case (``NotImplementedError``);
* passes Python numbers through to the kernel as ATen does, and turns them into 0-dim
  tensors (PyTorch's wrapped-number rule for the dtype) only on the way to the original
  kernel, which takes tensors for ``Tensor`` arguments;
* counts calls: ``call_counts()`` -> ``{op: {"served": n, "fallback": n, "nested": n,
  "declined": n}}`` (``nested``: calls of the op made from inside its own kernel, sent to
  the original; ``declined``: calls a serve policy sent to the original);
* with a serve policy (:mod:`opbench.backends.serve_policy`, from a judged run), registers
  only the operators the policy serves and, within one, serves only the shape classes
  where the run found the kernel faster than eager, handing the rest to the original.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch

from opbench.backends.base import Backend
from opbench.backends.native.gates import GateSet, dispatcher_name
from opbench.backends.serve_policy import ServePolicy
from opbench.spec.ops import all_overload_names, canonical_name
from opbench.spec.variants import functional_of, tensor_arg_positions

log = logging.getLogger(__name__)

__all__ = [
    "enable",
    "disable",
    "backend",
    "call_counts",
    "reset_counts",
    "replay_notes",
    "active_backends",
    "registration_notes",
    "default_device",
    "dispatch_key_for",
]

_lock = threading.RLock()
_tls = threading.local()
_stack: list[_Registration] = []
_last_counts: dict[str, dict[str, int]] = {}


def dispatch_key_for(device: str | torch.device) -> str:
    """``cpu`` -> ``CPU``; ``cuda``/``cuda:1`` -> ``CUDA``."""
    kind = torch.device(device).type
    if kind == "cpu":
        return "CPU"
    if kind == "cuda":
        return "CUDA"
    raise ValueError(f"opbench registers kernels on cpu or cuda, not {kind!r}")


def default_device() -> str:
    """The device a registration is for when none is named: ``cuda`` when available,
    else ``cpu`` (also read by the ``enable`` of packages ``opbench package`` builds)."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def _in_progress() -> set[tuple[int, str]]:
    s = getattr(_tls, "active", None)
    if s is None:
        s = _tls.active = set()
    return s


def _is_number(v: Any) -> bool:
    return isinstance(v, (bool, int, float, complex)) and not isinstance(v, torch.Tensor)


def _tensorize_numbers(
    op: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Python numbers in ``Tensor`` slots -> 0-dim CPU tensors, as wrapped numbers behave.

    The dtype is the one the number would take against the first tensor argument
    (``torch.result_type``), so type promotion gives what the untouched call gives.
    """
    positions = tensor_arg_positions(op)
    if not positions:
        return args, kwargs
    if not any(
        (i < len(args) and _is_number(args[i])) or _is_number(kwargs.get(n))
        for i, n, _ in positions
    ):
        return args, kwargs
    ref = next((a for a in args if isinstance(a, torch.Tensor)), None)
    if ref is None:
        ref = next((v for v in kwargs.values() if isinstance(v, torch.Tensor)), None)

    def conv(v: Any) -> Any:
        if not _is_number(v):
            return v
        dtype = torch.result_type(ref, v) if ref is not None else None
        return torch.scalar_tensor(v, dtype=dtype) if dtype is not None else torch.tensor(v)

    args_l = list(args)
    kwargs = dict(kwargs)
    for i, name, _ in positions:
        if i < len(args_l):
            args_l[i] = conv(args_l[i])
        elif name in kwargs:
            kwargs[name] = conv(kwargs[name])
    return tuple(args_l), kwargs


class _Registration:
    """One ``enable`` call: its ``Library``, its originals and its counters."""

    def __init__(
        self,
        backend: Backend,
        device: str,
        ops: Iterable[str] | None,
        policy: ServePolicy | None = None,
        native: bool = True,
    ) -> None:
        self.backend = backend
        self.policy = policy
        self.device = device
        self.key = dispatch_key_for(device)
        self.gates = GateSet(self.key, native=native)
        self.requested = None if ops is None else {canonical_name(o) for o in ops}
        self.lib: torch.library.Library | None = None
        self.counts: dict[str, dict[str, int]] = {}
        self.notes: dict[str, str] = {}
        self.registered: list[str] = []

    def register(self) -> None:
        if not hasattr(torch.library, "get_kernel"):
            raise RuntimeError(
                "opbench registration needs torch.library.get_kernel (torch >= 2.9); "
                f"this is torch {torch.__version__}"
            )
        served = set(self.backend.served_ops())
        if self.requested is not None:
            served &= self.requested
        elif self.backend.name == "aten":
            log.info("the aten backend registers nothing unless ops= is given")
            served = set()
        if self.policy is not None:
            keep = self.policy.served_ops() | {
                op for op in served if self._native_verdict_serves(op)
            }
            for op in sorted(served - keep):
                self.notes[op] = "not registered: the serve policy's run did not find it faster"
            served &= keep
        self.lib = torch.library.Library("aten", "IMPL")
        known = all_overload_names()
        with warnings.catch_warnings():
            warnings.filterwarnings(
                "ignore", message="(?s).*Overriding a previously registered kernel"
            )
            for op in sorted(served):
                if op not in known:
                    self.notes[op] = "not an overload of this torch; not registered"
                    continue
                kernel = self.backend.kernel_for(op)
                if kernel is None:
                    continue
                qual = f"aten::{dispatcher_name(op)}"
                try:
                    original = torch.library.get_kernel(qual, self.key)
                except (RuntimeError, ValueError) as e:
                    self.notes[op] = f"no original kernel on {self.key}: {e}"
                    continue
                if not torch._C._dispatch_has_kernel_for_dispatch_key(
                    qual, self.key
                ) and torch._C._dispatch_has_kernel_for_dispatch_key(
                    qual, "CompositeImplicitAutograd"
                ):
                    self.notes[op] = (
                        "CompositeImplicitAutograd: PyTorch decomposes it before the "
                        f"{self.key} key, so models reach this kernel only on direct calls"
                    )
                self.counts[op] = {"served": 0, "fallback": 0, "nested": 0, "declined": 0}
                entry = native_entry = None
                if self.policy is not None:
                    entry = self.policy.ops.get(op)
                    native_entry = self.policy.native_ops.get(op, entry)
                gated = self.gates.prepare(op, kernel, entry, native_entry)
                # a gated op's shape classes are decided in C++ before the wrapper runs
                wrapper = self._wrapper(op, kernel, original, classify=not gated)
                self.lib.impl(dispatcher_name(op), wrapper, self.key, with_keyset=True)
                if gated:
                    self.gates.install(op, dispatcher_name(op))
                self.registered.append(op)
        if self.gates.note:
            self.notes["(C++ gate)"] = self.gates.note
        log.info(
            "registered %d overloads of %s on %s", len(self.registered), self.backend.name, self.key
        )

    def _native_verdict_serves(self, op: str) -> bool:
        """The policy serves ``op``'s native launches (its device verdict), and this
        registration would launch it natively."""
        assert self.policy is not None
        entry = self.policy.native_ops.get(op)
        if entry is None or not entry.serve:
            return False
        kernel = self.backend.kernel_for(op)
        return kernel is not None and self.gates.native_spec(op, kernel) is not None

    def _wrapper(
        self, op: str, kernel: Callable[..., Any], original: Any, *, classify: bool = True
    ) -> Callable[..., Any]:
        counts = self.counts[op]
        token = (id(self), op)
        # A derived in-place/out= kernel runs the functional kernel: while it does, calls of
        # the functional op from inside are that kernel calling itself.
        tokens = {token}
        if getattr(kernel, "opbench_derived", None):
            functional = functional_of(op)
            if functional:
                tokens.add((id(self), functional))

        def call_original(keyset: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            args, kwargs = _tensorize_numbers(op, args, kwargs)
            return original.call_boxed(keyset, *args, **kwargs)

        # shape classes are looked at only where the policy's answer depends on them
        entry = self.policy.ops.get(op) if self.policy is not None else None
        policy = self.policy if classify and entry is not None and not entry.uniform else None

        def wrapper(keyset: Any, *args: Any, **kwargs: Any) -> Any:
            active = _in_progress()
            if token in active:
                counts["nested"] += 1
                return call_original(keyset, args, kwargs)
            if policy is not None and not policy.serves(op, args, kwargs):
                counts["declined"] += 1
                return call_original(keyset, args, kwargs)
            added = tokens - active
            active.update(added)
            try:
                result = kernel(*args, **kwargs)
            except NotImplementedError:
                active.difference_update(added)
                counts["fallback"] += 1
                return call_original(keyset, args, kwargs)
            finally:
                active.difference_update(added)
            counts["served"] += 1
            return result

        wrapper.__name__ = f"opbench_{op.replace('.', '_')}"
        return wrapper

    def call_counts(self) -> dict[str, dict[str, int]]:
        """The wrappers' counts with the gates' added: a call launched in C++ is
        ``served`` (and counted in ``native`` too; in ``replayed`` too where the gate
        repeated the Python path's launches), one the gate sent to eager ``declined``."""
        out = {}
        for op, d in self.counts.items():
            d = dict(d)
            g = self.gates.counts(op)
            if g:
                d["served"] += g["native"]
                d["declined"] += g["declined"]
                d["native"] = g["native"]
                d["replayed"] = g.get("replayed", 0)
            out[op] = d
        return out

    def reset_counts(self) -> None:
        for d in self.counts.values():
            for k in d:
                d[k] = 0
        self.gates.reset_counts()

    def destroy(self) -> None:
        # the gates first: each holds the wrapper below it, which the library removes
        if self.gates.gates:
            self.counts = self.call_counts()
            self.gates.close()
        if self.lib is not None:
            lib, self.lib = self.lib, None
            try:
                lib._destroy()
            except Exception as e:  # already destroyed (e.g. by the module loader)
                log.debug("library of %s already removed: %s", self.backend.name, e)


def enable(
    backend: Backend,
    device: str | None = None,
    *,
    ops: Iterable[str] | None = None,
    policy: ServePolicy | None = None,
    native: bool = True,
) -> Backend:
    """Register a loaded backend's kernels into PyTorch; returns ``backend``.

    ``device``: ``cpu`` or ``cuda`` (default: :func:`default_device`). ``ops`` limits the
    registration to these overloads (the ``aten`` backend registers only those given).
    ``policy``: serve only where a judged run found the kernels faster
    (:mod:`opbench.backends.serve_policy`). ``native``: put the C++ gate
    (:mod:`opbench.backends.native`) in front of the ops where it pays (kernels with a
    native launch on CUDA, shape-class policies); False registers the Python path alone.
    A spec (``"my_kernels/"``, ``module:NAME``, ``aten``) is loaded first by
    :func:`opbench.enable` (:mod:`opbench.backends.api`).
    """
    if not isinstance(backend, Backend):
        raise TypeError(
            f"registry.enable takes a loaded Backend, not {type(backend).__name__}; "
            "for a spec or a path use opbench.enable"
        )
    device = device or default_device()
    reg = _Registration(backend, device, ops, policy, native)
    with _lock:
        try:
            reg.register()
        except BaseException:
            reg.destroy()
            raise
        _stack.append(reg)
    return backend


def disable(backend: Backend | None = None) -> None:
    """Remove registrations (all, or only ``backend``'s), newest first."""
    global _last_counts
    with _lock:
        keep: list[_Registration] = []
        removed: list[_Registration] = []
        for reg in reversed(_stack):
            if backend is None or reg.backend is backend:
                reg.destroy()
                removed.append(reg)
            else:
                keep.append(reg)
        _stack[:] = list(reversed(keep))
        if removed:
            _last_counts = _merge(r.counts for r in reversed(removed))


@contextlib.contextmanager
def backend(
    backend: Backend,
    device: str | None = None,
    *,
    ops: Iterable[str] | None = None,
    policy: ServePolicy | None = None,
    native: bool = True,
) -> Iterator[Backend]:
    """``with registry.backend(be, device="cpu"): model(x)``; removed on exit."""
    be = enable(backend, device, ops=ops, policy=policy, native=native)
    try:
        yield be
    finally:
        disable(be)


def _merge(counts: Iterable[dict[str, dict[str, int]]]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for c in counts:
        for op, d in c.items():
            tgt = out.setdefault(op, {"served": 0, "fallback": 0, "nested": 0, "declined": 0})
            for k, v in d.items():
                tgt[k] = tgt.get(k, 0) + v
    return out


def call_counts() -> dict[str, dict[str, int]]:
    """Per registered op: ``served`` / ``fallback`` / ``nested`` calls, for the active
    registrations, or for the last ones removed when none is active."""
    with _lock:
        if _stack:
            return _merge(r.call_counts() for r in _stack)
        return {k: dict(v) for k, v in _last_counts.items()}


def replay_notes() -> dict[str, list[dict[str, object]]]:
    """Per gated op of the active registrations, what launch replay knows of each call
    signature it saw (ready, recordings, the recorder's reason for refusing one): why a
    call stayed a Python call."""
    with _lock:
        out: dict[str, list[dict[str, object]]] = {}
        for r in _stack:
            for op, gate in r.gates.gates.items():
                out.setdefault(op, []).extend(gate.replay_notes())
        return out


def reset_counts() -> None:
    global _last_counts
    with _lock:
        for reg in _stack:
            reg.reset_counts()
        _last_counts = {}


def active_backends() -> list[Backend]:
    with _lock:
        return [r.backend for r in _stack]


def registration_notes() -> dict[str, str]:
    """Ops of the active registrations that were skipped or will rarely be reached, and why."""
    with _lock:
        out: dict[str, str] = {}
        for r in _stack:
            out.update(r.notes)
        return out
