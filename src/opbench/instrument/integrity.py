"""Has candidate code changed the instrument it runs inside?

Runs in the WORKER. :class:`Fingerprint` is taken after the worker's own modules are
imported and before any candidate module is: the identity of every function and class
attribute of opbench's modules, of the ``torch`` and ``torch._C`` functions and ``Tensor``
methods the worker and PyTorch's own checks use, of the modules in ``sys.modules`` that hold them,
of the C++ gate's functions where the worker loaded it, the tracing hooks, and the backend
settings and thread count the run pinned.
:meth:`Fingerprint.changes` lists what differs now, as plain lines; the harness turns a
non-empty list into the verdict ``tampering``.

This is a tripwire, not a wall: code in the same process can, in principle, restore
what it changed before the next check, or patch this module's own state. The static
scan (:mod:`opbench.judge.static_scan`) flags the means (``sys.modules``, ``gc``,
frame inspection, ``setattr`` on torch), and per-op isolation keeps what one module
does away from every other operator's verdict.
"""

from __future__ import annotations

import copy
import sys
import threading
import types
from collections.abc import Callable
from typing import Any

import torch

from opbench.backends.native.build import loaded_module
from opbench.instrument.settings import CUDA_INITIALISED_ONLY
from opbench.instrument.settings import read as read_settings

__all__ = ["Fingerprint", "settings_snapshot"]

#: ``torch`` functions whose replacement would change how the worker reads results.
TORCH_FUNCTIONS = (
    "equal allclose isclose isnan isinf isfinite eq ne abs sub add mul where clone "
    "empty empty_like empty_strided zeros ones manual_seed set_num_threads get_num_threads "
    "from_numpy as_strided"
).split()
#: ``torch._C`` functions the worker reads its own state through after candidate code is
#: imported: the dispatch table that says whether a kernel was put in front of the gate
#: (:func:`opbench.instrument.native_calls.foreign_kernels`), the dispatcher queries of
#: the registry and the module backend, the guard the observers count under. A candidate
#: that replaced ``_dispatch_dump_table`` with one that drops its own lines would hide a
#: kernel registered on the twin.
TORCH_C_FUNCTIONS = (
    "_dispatch_dump_table _dispatch_dump _dispatch_has_kernel_for_dispatch_key "
    "_DisableTorchDispatch DispatchKeySet"
).split()
#: ``torch.Tensor`` attributes the worker uses to copy, compare and describe tensors.
TENSOR_ATTRS = (
    "__eq__ __ne__ __torch_dispatch__ __torch_function__ clone detach to cpu cuda "
    "as_strided copy_ numpy data_ptr untyped_storage storage_offset stride size numel "
    "contiguous view reshape __getitem__ __setitem__ item tolist equal eq"
).split()
_SUBMODULES = ("torch.testing", "torch.cuda", "torch.autograd.profiler", "torch.profiler")


def settings_snapshot() -> dict[str, Any]:
    """The PyTorch settings a run pins or records (:mod:`opbench.instrument.settings`:
    thread counts, float32 precision of matmuls and convolutions, cuDNN modes, attention
    backends, deterministic algorithms, the default dtype) and grad mode: a module could
    change any of them to slow the reference or make it less precise. ~40 us."""
    s = read_settings()
    # read only once CUDA is initialised (not in the fork server's template, where a
    # worker's fingerprint starts): a key present on one side only is not a change
    for key in CUDA_INITIALISED_ONLY:
        s.pop(key, None)
    s["grad_enabled"] = torch.is_grad_enabled()
    return s


def _opbench_items() -> list[tuple[str, Any]]:
    """``(name, module)`` of every opbench module imported. Only the names of the others
    are read: in a fresh fork of the template, touching each of the ~2,500 module objects
    (their reference counts) copied their pages, about 6 ms of a worker's start
    (2026-11-27, a fork of the warm template on the 2-core CPU machine)."""
    modules = sys.modules
    names = [n for n in list(modules) if n == "opbench" or n.startswith("opbench.")]
    return [(n, m) for n in names if (m := modules.get(n)) is not None]


def _opbench_modules() -> frozenset[tuple[str, int]]:
    return frozenset((name, id(mod)) for name, mod in _opbench_items())


def _gate_items() -> dict[str, int]:
    """Identity of the C++ gate's module functions and of its ``Gate`` class's methods,
    where this process has loaded it (``{}`` otherwise). The worker reads a twin's route
    through them (``Gate.counts``, ``dry_native``) and makes the wrapped numbers it hands
    the twin (``wrapped_number``); the extension is not an opbench module, so the walk of
    those does not see a candidate replace one (``counts`` reporting every call native
    would have the observers trust calls they never saw)."""
    module = loaded_module()
    if module is None:
        return {}
    out = {"gate": id(module)}
    for k, v in list(vars(module).items()):
        if callable(v):
            out[f"gate.{k}"] = id(v)
    gate = getattr(module, "Gate", None)
    if gate is not None:
        for k, v in list(vars(gate).items()):
            if callable(v) or isinstance(v, (staticmethod, classmethod, property)):
                out[f"gate.Gate.{k}"] = id(v)
    return out


def _raw_snapshot() -> tuple[Any, ...]:
    """Every identity :meth:`Fingerprint._take` records, in a flat tuple without names
    (a superset: any value a module holds, so a reassigned global also differs and sends
    :meth:`Fingerprint.changes` down the named path, which then finds nothing)."""
    out: list[Any] = []
    add = out.append
    for name, mod in _opbench_items():
        add(name)
        add(id(mod))
        mod_name = mod.__name__
        for v in list(vars(mod).values()):
            add(id(v))
            if isinstance(v, types.FunctionType):
                add(id(v.__code__))
            elif isinstance(v, type) and v.__module__ == mod_name:
                for av in list(vars(v).values()):
                    add(id(av))
                    code = getattr(av, "__code__", None)
                    if code is not None:
                        add(id(code))
    for name in ("torch", *_SUBMODULES):
        add(id(sys.modules.get(name)))
    for n in TORCH_FUNCTIONS:
        add(id(getattr(torch, n, None)))
    add(id(getattr(torch, "_C", None)))
    for n in TORCH_C_FUNCTIONS:
        add(id(getattr(torch._C, n, None)))
    tensor_dict = torch.Tensor.__dict__
    for n in TENSOR_ATTRS:
        add(id(tensor_dict.get(n, getattr(torch.Tensor, n, None))))
    testing = sys.modules.get("torch.testing")
    for n in ("assert_close", "assert_allclose"):
        add(id(getattr(testing, n, None)))
    out.extend(_gate_items().values())
    add(sys.gettrace())
    add(sys.getprofile())
    add(getattr(threading, "_trace_hook", None))
    add(getattr(threading, "_profile_hook", None))
    return tuple(out)


def _module_items(mod: types.ModuleType) -> dict[str, int]:
    """Identity of the functions and classes a module holds, and of class attributes."""
    out: dict[str, int] = {}
    for k, v in list(vars(mod).items()):
        if isinstance(v, (types.FunctionType, type, types.BuiltinFunctionType)):
            out[k] = id(v)
            if isinstance(v, types.FunctionType):
                out[f"{k}.__code__"] = id(v.__code__)
            if isinstance(v, type) and v.__module__ == mod.__name__:
                for ak, av in list(vars(v).items()):
                    if callable(av) or isinstance(av, (staticmethod, classmethod, property)):
                        out[f"{k}.{ak}"] = id(av)
                        code = getattr(av, "__code__", None)
                        if code is not None:
                            out[f"{k}.{ak}.__code__"] = id(code)
    return out


class Fingerprint:
    """What the worker's instrument looks like now, to compare with later."""

    def __init__(self) -> None:
        self._taken: dict[str, int | str] = self._take()
        self._raw = _raw_snapshot()
        self._settings = settings_snapshot()
        self._modules = _opbench_modules()
        self._n_modules = len(sys.modules)

    @classmethod
    def inherited(cls, template: Fingerprint | None) -> Fingerprint:
        """The fork-server template's fingerprint, taken after its warm-up, for a worker
        forked from it that has imported no opbench module since (the same objects, so
        the same identities: walking every module again in each fresh fork cost ~16 ms
        of copy-on-write page faults per operator); else a fresh one. Settings are read
        anew: the worker pins its own thread count after the fork."""
        if template is None:
            return cls()
        # only trusted code has run since the fork, and it removes no module: as many
        # modules as the template had are the template's modules, read without walking
        # sys.modules (which copies pages in a fresh fork)
        if len(sys.modules) != template._n_modules and template._modules != _opbench_modules():
            return cls()
        f = copy.copy(template)
        # the gate, when loaded since the fork (by the worker, before any candidate code):
        # its functions join the named snapshot the changes are read against
        gate = _gate_items()
        if any(k not in template._taken for k in gate):
            f._taken = {**template._taken, **gate}
        f._settings = settings_snapshot()
        # the flat snapshot only filters: re-taken now (trusted code has run since the
        # template's, e.g. setting module globals), so a test with no change stays on the
        # fast path; the named snapshot it is checked against is still the template's
        f._raw = _raw_snapshot()
        return f

    def _take(self) -> dict[str, int | str]:
        f: dict[str, int | str] = {}
        for name, mod in _opbench_items():
            f[f"sys.modules[{name}]"] = id(mod)
            for k, v in _module_items(mod).items():
                f[f"{name}.{k}"] = v
        for name in ("torch", *_SUBMODULES):
            mod = sys.modules.get(name)
            if mod is not None:
                f[f"sys.modules[{name}]"] = id(mod)
        for n in TORCH_FUNCTIONS:
            if hasattr(torch, n):
                f[f"torch.{n}"] = id(getattr(torch, n))
        f["torch._C"] = id(torch._C)
        for n in TORCH_C_FUNCTIONS:
            if hasattr(torch._C, n):
                f[f"torch._C.{n}"] = id(getattr(torch._C, n))
        for n in TENSOR_ATTRS:
            v = torch.Tensor.__dict__.get(n, getattr(torch.Tensor, n, None))
            if v is not None:
                f[f"torch.Tensor.{n}"] = id(v)
        testing = sys.modules.get("torch.testing")
        if testing is not None:
            for n in ("assert_close", "assert_allclose"):
                if hasattr(testing, n):
                    f[f"torch.testing.{n}"] = id(getattr(testing, n))
        f.update(_gate_items())
        f["sys.gettrace"] = repr(sys.gettrace())
        f["sys.getprofile"] = repr(sys.getprofile())
        f["threading.settrace"] = repr(getattr(threading, "_trace_hook", None))
        f["threading.setprofile"] = repr(getattr(threading, "_profile_hook", None))
        return f

    def changes(self, *, settings: bool = True) -> list[str]:
        """What differs from when the fingerprint was taken, as readable lines.

        The same identities are first compared as a flat tuple (no names built): equal,
        nothing changed; only a difference builds the named snapshot to say what (the
        named walk cost ~4 ms per test in a busy 2-core worker, the flat one a fraction)."""
        lines = []
        if _raw_snapshot() != self._raw:
            now = self._take()
            for k, v in self._taken.items():
                if now.get(k) != v:
                    lines.append(f"{k} was replaced" if k in now else f"{k} was removed")
        if settings:
            lines.extend(self.settings_changes())
        return lines

    def settings_changes(self) -> list[str]:
        now = settings_snapshot()
        return [
            f"PyTorch setting {k} changed from {v!r} to {now.get(k)!r}"
            for k, v in self._settings.items()
            if now.get(k) != v
        ]

    def restore_settings(self, set_threads: Callable[[int], None] = torch.set_num_threads) -> None:
        """Put the thread count back (the reference must not run on fewer cores because a
        candidate changed it; the change itself is still reported)."""
        n = self._settings.get("num_threads")
        if isinstance(n, int) and torch.get_num_threads() != n:
            set_threads(n)
