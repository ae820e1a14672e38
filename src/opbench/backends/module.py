"""``module:NAME[:FUNC]``: a package that registers its own kernels into PyTorch through
``torch.library`` when ``NAME.FUNC()`` is called (FlagGems' ``flag_gems.enable()``).

To judge each replaced overload against PyTorch computed *without* the package, the
loader:

1. notes which kernel is active for every ``aten`` overload on the device's dispatch key
   (``torch._C._dispatch_dump``), and records every ``torch.library.Library.impl`` call
   made while ``NAME.FUNC()`` runs (the Python function, its key, ``with_keyset``);
2. diffs the dispatch table afterwards: the overloads whose active kernel changed are
   the ones the package replaced;
3. keeps the recorded Python functions as the candidate kernels and removes the
   package's ``aten`` registrations again (``Library._destroy``), so reference
   computations and timings in the same process run PyTorch's own kernels.

Overloads replaced by C++ registrations (no Python function to hold) cannot be run
beside PyTorch's original; they are listed in ``load_errors`` and not judged.
"""

from __future__ import annotations

import importlib
import logging
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from opbench.backends.base import Backend, BackendError
from opbench.spec.ops import all_overload_names, canonical_name

log = logging.getLogger(__name__)

__all__ = ["ModuleBackend", "RecordedImpl", "active_kernel_lines"]

#: Keys whose registration affects every device (besides the device's own key).
_ALL_DEVICE_KEYS = ("CompositeExplicitAutograd", "CompositeImplicitAutograd")


@dataclass
class RecordedImpl:
    """One ``Library.impl`` call made by the package."""

    op: str  # add.Tensor
    key: str
    fn: Callable[..., Any]
    with_keyset: bool
    lib: Any


def _op_name(op_name: Any) -> str | None:
    if isinstance(op_name, torch._ops.OpOverload):
        ns, _, name = op_name._schema.name.partition("::")
        if ns != "aten":
            return None
        return f"{name}.{op_name._overloadname or 'default'}"
    if not isinstance(op_name, str):
        return None
    if "::" in op_name:
        ns, _, op_name = op_name.partition("::")
        if ns != "aten":
            return None
    name = canonical_name(op_name)
    return name if "." in name else f"{name}.default"


def active_kernel_lines(key: str) -> dict[str, str]:
    """``op -> 'KEY: registered at ...'`` for every aten overload with a kernel on ``key``.

    ~0.05 s for all overloads; the text names the file that registered the kernel, so
    a changed line means a replaced kernel.
    """
    prefix = f"{key}: "
    out: dict[str, str] = {}
    for op in all_overload_names():
        qual = "aten::" + (op[: -len(".default")] if op.endswith(".default") else op)
        try:
            text = torch._C._dispatch_dump(qual)
        except RuntimeError:
            continue
        for line in text.splitlines():
            if line.startswith(prefix):
                out[op] = line
                break
    return out


class ModuleBackend(Backend):
    """Kernels of an installed package that registers itself through ``torch.library``."""

    def __init__(self, module: str, func: str = "enable", device: str = "cpu") -> None:
        super().__init__()
        from opbench.backends.registry import dispatch_key_for

        self.name = f"module:{module}:{func}"
        self.device = device
        self.key = dispatch_key_for(device)
        self.replaced: set[str] = set()
        self._kernels: dict[str, Callable[..., Any]] = {}
        self._notes: dict[str, str] = {}
        self._load(module, func)

    def _load(self, module: str, func: str) -> None:
        from opbench.backends import registry

        keys = (self.key, *_ALL_DEVICE_KEYS)
        before = {k: active_kernel_lines(k) for k in keys}
        stacked = {id(b) for b in registry.active_backends()}
        try:
            mod = importlib.import_module(module)
        except ImportError as e:
            raise BackendError(
                f"cannot import backend module {module!r} ({e}); is it installed in this Python?"
            ) from None
        enable = getattr(mod, func, None)
        if not callable(enable):
            raise BackendError(f"module {module!r} has no function {func!r} to enable its kernels")

        recorded: list[RecordedImpl] = []
        lib_cls = torch.library.Library
        original_impl = lib_cls.impl

        def recording_impl(
            lib: Any, op_name: Any, fn: Any, dispatch_key: str = "", *a: Any, **kw: Any
        ) -> Any:
            result = original_impl(lib, op_name, fn, dispatch_key, *a, **kw)
            if getattr(lib, "ns", None) == "aten":
                name = _op_name(op_name)
                if name is not None and callable(fn):
                    key = (
                        dispatch_key
                        or getattr(lib, "dispatch_key", "")
                        or "CompositeImplicitAutograd"
                    )
                    recorded.append(
                        RecordedImpl(name, key, fn, bool(kw.get("with_keyset", False)), lib)
                    )
            return result

        lib_cls.impl = recording_impl  # type: ignore[method-assign]
        try:
            enable()
        except Exception as e:
            raise BackendError(f"{module}.{func}() failed: {type(e).__name__}: {e}") from None
        finally:
            lib_cls.impl = original_impl  # type: ignore[method-assign]

        after = {k: active_kernel_lines(k) for k in keys}
        changed: dict[str, str] = {}
        for k in keys:
            for op, line in after[k].items():
                if before[k].get(op) != line:
                    changed.setdefault(op, k)
        self.replaced = set(changed)

        by_op: dict[str, RecordedImpl] = {}
        for r in recorded:
            if r.key in keys and (r.op not in by_op or r.key == self.key):
                by_op[r.op] = r
        for op, r in by_op.items():
            self._kernels[op] = self._callable(r)
            if r.key != self.key:
                self._notes[op] = f"registered on {r.key} (every device)"
            else:
                self._notes[op] = (
                    f"{module}: {getattr(r.fn, '__module__', '?')}.{getattr(r.fn, '__qualname__', '?')}"
                )
        for op in sorted(self.replaced - set(by_op)):
            self.load_errors[op] = (
                f"{module}: replaced {op} on {changed[op]} outside torch.library's Python API "
                "(C++ registration); it cannot run beside PyTorch's original, not judged"
            )
        # Take the package's aten registrations out again: references and timings in this
        # process must run PyTorch's own kernels; the recorded functions are the candidates.
        libs = {id(r.lib): r.lib for r in recorded}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for lib in libs.values():
                try:
                    lib._destroy()
                except Exception as e:  # a lib the package already destroyed itself
                    log.debug("could not destroy %r: %s", lib, e)
        for b in registry.active_backends():  # a package built with ``opbench package``
            if id(b) not in stacked:
                registry.disable(b)
        log.info("%s replaced %d aten overloads on %s", self.name, len(self._kernels), self.key)

    def _callable(self, r: RecordedImpl) -> Callable[..., Any]:
        if not r.with_keyset:
            return r.fn
        keyset = torch._C.DispatchKeySet(getattr(torch._C.DispatchKey, self.key))
        fn = r.fn

        def with_keyset(*args: Any, **kwargs: Any) -> Any:
            return fn(keyset, *args, **kwargs)

        with_keyset.__name__ = getattr(fn, "__name__", "kernel")
        return with_keyset

    def kernel_for(self, op: str) -> Callable[..., Any] | None:
        return self._kernels.get(canonical_name(op))

    def served_ops(self) -> set[str]:
        return set(self._kernels)

    def coverage_note(self, op: str) -> str | None:
        return self._notes.get(canonical_name(op))
