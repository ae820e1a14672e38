"""The C++ gates of one registration: which operators get one, installing them over the
backend's Python wrappers, their counts, and removing them.

An operator gets a gate where it pays: on CUDA for a kernel that declares a native launch
(:class:`~opbench.backends.native.spec.NativeSpec`) or asks for its launches to be
replayed (:mod:`~opbench.backends.native.replay`), and on any device where the serve
policy's answer depends on the call's shape class (the gate then sends the declined calls
to eager's kernel without entering Python). Every other operator keeps the Python wrapper
alone. Without the extension (:func:`~opbench.backends.native.build.gate_module` is None)
nothing here runs and the registry notes why.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

from opbench.backends.native.build import dtype_of_code, gate_module, unavailable_reason
from opbench.backends.native.replay import Recorder, replay_loader
from opbench.backends.native.spec import OTHER_KINDS, NativeSpec
from opbench.backends.serve_policy import OpPolicy

__all__ = [
    "GateSet",
    "arm_native",
    "arm_replay",
    "dispatcher_name",
    "native_compiler",
    "new_gate",
]

log = logging.getLogger(__name__)


class GateSet:
    """The gates of one ``enable`` call. Use: :meth:`prepare` before the op's Python
    wrapper is registered, :meth:`install` right after it, :meth:`close` before the
    wrappers are removed."""

    def __init__(self, key: str, *, native: bool = True) -> None:
        self.key = key
        self.native = native
        self.module: Any = None
        self.gates: dict[str, Any] = {}
        #: op -> (its gate, its native spec, the policy's host and device verdicts, the
        #: loader of its replayed kernels or None)
        self._pending: dict[
            str, tuple[Any, NativeSpec | None, OpPolicy | None, OpPolicy | None, Any]
        ] = {}
        self._codes: dict[int, torch.dtype] = {}
        #: why no gate was installed where one was wanted (once per registration)
        self.note: str | None = None

    def native_spec(self, op: str, kernel: Any) -> NativeSpec | None:
        """The native launch ``kernel`` declares for ``op``, where this registration uses
        one (CUDA, ``native`` on)."""
        if not self.native or self.key != "CUDA":
            return None
        return NativeSpec.of(kernel, op)

    def prepare(
        self, op: str, kernel: Any, entry: OpPolicy | None, native_entry: OpPolicy | None = None
    ) -> bool:
        """Capture eager's kernel for ``op`` if it will be gated (call before the Python
        wrapper is registered); False when it will not. ``entry``: the policy's host
        verdict on ``op``, ``native_entry`` its device verdict (None: serve every call)."""
        if not self.native:  # the Python path alone, on purpose
            return False
        spec = self.native_spec(op, kernel)
        loader = replay_loader(kernel, self.key)
        if spec is None and loader is None and (entry is None or (entry.uniform and entry.serve)):
            return False
        if self.module is None:
            self.module = gate_module()
            if self.module is None:
                self.note = unavailable_reason()
                return False
            self._codes = dtype_of_code()
        gate = new_gate(self.module, "aten", op, self.key)
        gate.capture_eager()
        self._pending[op] = (gate, spec, entry, native_entry, loader)
        return True

    def install(self, op: str, dispatcher_name: str) -> None:
        """Put the prepared gate of ``op`` over the wrapper registered since."""
        gate, spec, entry, native_entry, loader = self._pending.pop(op)
        gate.set_policy("python", *_verdict(entry))
        if spec is not None:
            gate.set_policy("native", *_verdict(native_entry))
            arm_native(gate, op, spec, self._codes)
        if loader is not None:
            arm_replay(gate, self._codes, loader)
        gate.install(dispatcher_name)
        self.gates[op] = gate

    def counts(self, op: str) -> dict[str, int]:
        """``native`` (launched in C++), ``declined`` (sent to eager by the policy) and
        ``python`` (handed to the wrapper) calls of ``op``'s gate; {} without one."""
        gate = self.gates.get(op)
        return dict(gate.counts()) if gate is not None else {}

    def reset_counts(self) -> None:
        for gate in self.gates.values():
            gate.reset_counts()

    def close(self) -> None:
        for op, gate in list(self.gates.items()):
            try:
                gate.close()
            except Exception as e:  # never leave a wrapper behind because one gate failed
                log.warning("closing the gate of %s: %s", op, e)
        self.gates.clear()
        self._pending.clear()


def dispatcher_name(op: str) -> str:
    """``relu.default`` -> ``relu`` (how ``Library.impl`` and ``get_kernel`` spell it)."""
    return op[: -len(".default")] if op.endswith(".default") else op


def new_gate(module: Any, namespace: str, op: str, key: str) -> Any:
    """A gate (not yet installed) for ``namespace::op`` on dispatch key ``key``."""
    name, _, overload = op.partition(".")
    return module.Gate(f"{namespace}::{name}", "" if overload in ("", "default") else overload, key)


def arm_native(gate: Any, op: str, spec: NativeSpec, codes: dict[int, torch.dtype]) -> None:
    """Give ``gate`` the native launch ``spec`` declares for ``op``."""
    strided = spec.compile_strided
    gate.set_native(
        operands=spec.operands,
        inplace=spec.inplace,
        param_args=list(spec.param_args),
        param_defaults=[float(x) for x in spec.param_defaults],
        choice_arg=spec.choice_arg,
        choices=list(spec.choices),
        choice_numbers=[float(x) for x in spec.choice_numbers],
        none_args=list(spec.none_args),
        is_result_arg=spec.is_result_arg,
        other=OTHER_KINDS.index(spec.other),
        fill_value=spec.fill_value,
        params_required=spec.params_required,
        integers=spec.integers,
        max_numel=spec.max_numel,
        spread=spec.spread,
        min_block=spec.min_block,
        max_block=spec.max_block,
        compile=native_compiler(op, spec.compile, codes),
        compile_strided=None if strided is None else native_compiler(op, strided, codes),
    )


def arm_replay(gate: Any, codes: dict[int, torch.dtype], loader: Any) -> None:
    """Have ``gate`` replay the launches of the calls its Python path serves, its kernels
    loaded by ``loader`` (the kernel's declaration)."""
    code_of = {dtype: code for code, dtype in codes.items()}
    gate.set_replay(Recorder(code_of.__getitem__, loader))


def native_compiler(op: str, compile: Any, codes: dict[int, torch.dtype]) -> Any:
    """The callback a gate compiles a variant with: a spec's ``compile`` or
    ``compile_strided`` on torch dtypes (the gate passes c10's dtype codes, ``codes`` maps
    them back; the arguments after the dtypes pass as they are); a variant that fails to
    compile is logged and its calls take the Python path."""

    def compile_variant(
        choice: int, a_code: int, b_mode: int, b_code: int, *rest: Any
    ) -> tuple[int, int, int, int] | None:
        try:
            return compile(choice, codes[a_code], b_mode, codes[b_code], *rest)
        except Exception as e:  # the call still runs, through Python
            log.warning("no native kernel for %s (%s); those calls take the Python path", op, e)
            return None

    return compile_variant


def _verdict(entry: OpPolicy | None) -> tuple[str, dict[str, bool], bool]:
    """``(mode, classes, default)`` of one side's verdict for the gate."""
    if entry is None:
        return "all", {}, True
    if not entry.serve:
        return "none", {}, False
    if entry.uniform:
        return ("all" if entry.default else "none"), {}, entry.default
    return "classes", {c: bool(v["serve"]) for c, v in entry.classes.items()}, entry.default
