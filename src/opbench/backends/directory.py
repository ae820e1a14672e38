"""A kernel directory in the BackendBench layout, loaded as a backend.

``DIR/<folder>/<folder>_implementation*.py`` defines ``<folder>_kernel_impl`` (and
optionally ``<folder>_supports(*args, **kwargs) -> bool``). ``<folder>`` is an overload
with ``.`` written ``__`` (``add__Tensor``, ``add___Tensor`` for ``add_.Tensor``,
``add__out``) or a bare op (``add``) that serves every overload of that op. In-place and
``out=`` overloads without a kernel of their own are derived from the functional kernel
(:mod:`opbench.spec.variants`). Precedence for an overload: its own folder, then the
bare folder of its op (``relu_`` for ``relu_.default``, ``add`` for ``add.Scalar``; a bare
folder never serves ``out=`` overloads), then a variant derived from its functional
overload's kernel. A bare in-place folder is the op's own kernel: the derived variant
runs the functional kernel and copies into ``self``, one more pass over memory
(0.6x eager on the H100 for ``add_`` and ``hardtanh_`` where the in-place kernel ran at
1.0x).

Every problem (undecodable folder, no implementation file, syntax or import error, a
missing function) is recorded in ``load_errors`` with the file and the reason; the
other kernels still load. Kernel files are imported when the backend is built, which
happens only inside the worker.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import logging
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from opbench.backends.base import Backend, BackendError
from opbench.backends.units import DirectoryLayout
from opbench.spec import variants
from opbench.spec.ops import (
    all_overload_names,
    canonical_name,
)

log = logging.getLogger(__name__)

__all__ = ["DirectoryBackend", "LoadedKernel"]


@dataclass(frozen=True)
class LoadedKernel:
    """One folder's kernel: what it is named for and where it came from."""

    folder: str
    target: str  # an overload (add.Tensor) or a bare op (add)
    file: Path
    fn: Callable[..., Any]
    supports: Callable[..., bool] | None


def _import_file(path: Path, root: Path) -> ModuleType:
    tag = hashlib.sha1(str(root.resolve()).encode()).hexdigest()[:10]
    mod_name = f"opbench_kernels_{tag}.{path.parent.name}.{path.stem}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    added = str(path.parent)
    sys.path.insert(0, added)  # sibling helper modules of the kernel file
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(mod_name, None)
        raise
    finally:
        try:
            sys.path.remove(added)
        except ValueError:
            pass
    return module


def _describe(e: BaseException) -> str:
    if isinstance(e, SyntaxError):
        return f"syntax error at line {e.lineno}: {e.msg}"
    frames = traceback.extract_tb(e.__traceback__)
    where = f" (line {frames[-1].lineno})" if frames else ""
    return f"{type(e).__name__}: {e}{where}"


def _with_supports(
    fn: Callable[..., Any], supports: Callable[..., bool] | None, label: str
) -> Callable[..., Any]:
    """The kernel, raising ``NotImplementedError`` where ``supports`` says no."""
    if supports is None:
        return fn

    @functools.wraps(fn)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        if not supports(*args, **kwargs):
            raise NotImplementedError(f"{label}: declined by its _supports function")
        return fn(*args, **kwargs)

    return guarded


class DirectoryBackend(Backend):
    """Kernels loaded from a BackendBench-style directory."""

    def __init__(
        self,
        path: str | Path,
        device: str = "cpu",
        *,
        kernel_version: str | None = None,
        only: set[str] | None = None,
    ) -> None:
        super().__init__()
        #: load only these folders (an isolation unit, :mod:`opbench.backends.units`)
        self.only = set(only) if only is not None else None
        self.path = Path(path)
        if not self.path.is_dir():
            raise BackendError(f"backend directory {str(path)!r} does not exist")
        self.name = str(self.path)
        self.device = device
        self.kernel_version = kernel_version
        self.kernels: dict[str, LoadedKernel] = {}  # target -> kernel
        self._notes: dict[str, str] = {}
        self._resolved: dict[str, tuple[Callable[..., Any], str]] = {}
        self._load()
        self._resolve()

    # ------------------------------------------------------------------ loading

    def _load(self) -> None:
        layout = DirectoryLayout(self.path, self.kernel_version, self.only)
        self.load_errors.update(layout.errors)
        for folder, file in layout.files.items():
            target = layout.targets[folder]
            rel = f"{folder}/{file.name}"
            if folder in layout.notes:
                self._notes[target] = layout.notes[folder]
            try:
                module = _import_file(file, self.path)
            except KeyboardInterrupt:
                raise
            except BaseException as e:  # SystemExit from a kernel file is its failure too
                self.load_errors[folder] = f"{rel}: {_describe(e)}"
                continue
            fn = getattr(module, f"{folder}_kernel_impl", None)
            if not callable(fn):
                found = sorted(n for n in vars(module) if n.endswith("_kernel_impl"))
                hint = f" (found {', '.join(found)})" if found else ""
                self.load_errors[folder] = f"{rel}: no function {folder}_kernel_impl{hint}"
                continue
            supports = getattr(module, f"{folder}_supports", None)
            if supports is not None and not callable(supports):
                supports = None
            self.kernels[target] = LoadedKernel(folder, target, file, fn, supports)
            log.debug("loaded %s from %s", target, rel)

    def _resolve(self) -> None:
        """Map every overload this directory can serve to a callable."""
        explicit = {t: k for t, k in self.kernels.items() if "." in t}
        bare = {t: k for t, k in self.kernels.items() if "." not in t}

        def functional_kernel(functional: str) -> tuple[Callable[..., Any], str] | None:
            if functional in explicit:
                k = explicit[functional]
                return _with_supports(k.fn, k.supports, functional), self._rel(k)
            op = functional.split(".", 1)[0]
            if op in bare:
                k = bare[op]
                return _with_supports(k.fn, k.supports, functional), self._rel(k)
            return None

        for target, k in explicit.items():
            self._resolved[target] = (
                _with_supports(k.fn, k.supports, target),
                self._rel(k),
            )
        # Overloads a bare folder covers directly (functional ones, or any overload of a
        # bare in-place packet such as ``relu_``) and the variants of served functionals.
        candidates: set[str] = set(explicit)
        for op in bare:
            for name in variants.overloads_of(op):
                if variants.kind_of(name) != "other":
                    candidates.add(name)
        for name in list(candidates):
            fam = variants.family_of(name) if variants.kind_of(name) != "other" else None
            if fam is not None:
                candidates.update(fam.members())
        for name in sorted(candidates):
            if name in self._resolved:
                continue
            kind = variants.kind_of(name)
            op = name.split(".", 1)[0]
            if op in bare and (kind == "functional" or op.endswith("_")):
                k = bare[op]
                self._resolved[name] = (_with_supports(k.fn, k.supports, name), self._rel(k))
                continue
            fam = variants.family_of(name) if kind != "other" else None
            if kind in ("inplace", "out") and fam is not None:
                src = functional_kernel(fam.functional)
                if src is not None:
                    fn, where = src
                    derived = (
                        variants.derive_inplace(fn, name)
                        if kind == "inplace"
                        else variants.derive_out(fn, name)
                    )
                    self._resolved[name] = (derived, f"{kind} variant derived from {where}")

    def _rel(self, k: LoadedKernel) -> str:
        return f"{k.folder}/{k.file.name}"

    # ------------------------------------------------------------------ protocol

    def kernel_for(self, op: str) -> Callable[..., Any] | None:
        entry = self._resolved.get(canonical_name(op))
        return entry[0] if entry else None

    def served_ops(self) -> set[str]:
        return {n for n in self._resolved if n in all_overload_names()}

    def coverage_note(self, op: str) -> str | None:
        name = canonical_name(op)
        entry = self._resolved.get(name)
        if entry is None:
            return None
        note = self._notes.get(name) or self._notes.get(name.split(".", 1)[0])
        return f"{entry[1]}; {note}" if note else entry[1]
