"""Isolation units: which kernel folders a worker must import to judge one operator.

Runs in the HARNESS and imports nothing from the kernel directory: it reads folder
and file names only. Each operator is judged in a worker that has imported the code of
its own unit and nothing else, so one module's tampering (patching ``torch.equal`` at
import, overwriting opbench's helpers in ``sys.modules``) can reach no other
operator's verdict.

The unit of an overload is the folder named for it, the folder of the functional
overload its in-place or ``out=`` variant is derived from, and the bare-op folders of
both (``add/`` serves ``add.Tensor``, ``add_.Tensor`` and ``add.out``). Backends that
are one package (``module:NAME``) or PyTorch itself (``aten``) are one unit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from opbench.spec.ops import UnknownOpError, base_name, canonical_name, parse_folder_name

__all__ = [
    "WHOLE_BACKEND",
    "DirectoryLayout",
    "implementation_files",
    "layout_of",
    "pick_implementation",
]

_VERSION_RE = re.compile(r"_implementation(?:_?v(\d+))?(.*)\.py$")


def _version_of(path: Path, folder: str) -> tuple[int, str]:
    m = _VERSION_RE.search(path.name[len(folder) :])
    if m is None:
        return (-1, path.name)
    return (int(m.group(1)) if m.group(1) else 0, m.group(2) or "")


def implementation_files(folder_path: Path) -> list[Path]:
    """``<folder>_implementation*.py`` files, oldest first (``v10`` after ``v2``)."""
    folder = folder_path.name
    files = [
        p
        for p in folder_path.glob(f"{folder}_implementation*.py")
        if p.is_file() and p.name.startswith(f"{folder}_implementation")
    ]
    return sorted(files, key=lambda p: _version_of(p, folder))


def pick_implementation(folder_path: Path, kernel_version: str | None) -> tuple[Path | None, str]:
    """The file to load and a note (empty, or why another than asked was used)."""
    files = implementation_files(folder_path)
    if not files:
        return None, ""
    if kernel_version:
        want = kernel_version.strip()
        digits = want.lstrip("vV")
        for p in files:
            version, rest = _version_of(p, folder_path.name)
            if (
                p.name == want
                or p.stem == want
                or (digits.isdigit() and version == int(digits) and not rest)
            ):
                return p, ""
        return files[-1], f"version {want!r} not found; used {files[-1].name}"
    return files[-1], ""


#: The unit of a backend that cannot be split (aten, ``module:NAME``).
WHOLE_BACKEND: tuple[str, ...] = ()


@dataclass
class DirectoryLayout:
    """A kernel directory's folders and what each names, read without importing."""

    path: Path
    kernel_version: str | None = None
    #: read only these folders (a worker loading one unit need not glob the others)
    only: set[str] | None = None
    targets: dict[str, str] = field(default_factory=dict)  # folder -> overload or bare op
    files: dict[str, Path] = field(default_factory=dict)  # folder -> implementation file
    errors: dict[str, str] = field(default_factory=dict)  # folder -> why it cannot load
    notes: dict[str, str] = field(default_factory=dict)  # folder -> version picked instead

    def __post_init__(self) -> None:
        for folder_path in sorted(p for p in self.path.iterdir() if p.is_dir()):
            folder = folder_path.name
            if folder.startswith(".") or folder == "__pycache__":
                continue
            if (folder_path / "__init__.py").exists() and not any(
                folder_path.glob(f"{folder}_implementation*.py")
            ):
                continue  # a package of shared code beside the kernels (opbench.kernels._lib)
            if self.only is not None and folder not in self.only:
                continue
            try:
                self.targets[folder] = parse_folder_name(folder)
            except UnknownOpError as e:
                self.errors[folder] = f"{folder}/: folder names no ATen op or overload ({e})"
                continue
            file, note = pick_implementation(folder_path, self.kernel_version)
            if file is None:
                self.errors[folder] = (
                    f"{folder}/: no {folder}_implementation*.py file in the folder"
                )
                continue
            self.files[folder] = file
            if note:
                self.notes[folder] = note

    def unit_for(self, op: str) -> tuple[str, ...]:
        """The folders whose code the worker judging ``op`` imports (sorted; empty when
        no folder serves it)."""
        from opbench.spec.variants import functional_of, kind_of

        op = canonical_name(op)
        names = {op, base_name(op)}
        try:
            functional = functional_of(op) if kind_of(op) in ("inplace", "out") else None
        except (AttributeError, RuntimeError, ValueError):
            functional = None
        if functional:
            names |= {functional, base_name(functional)}
        return tuple(sorted(f for f, t in self.targets.items() if t in names and f in self.files))


def layout_of(spec: str, kernel_version: str | None = None) -> DirectoryLayout | None:
    """The layout when ``spec`` is a kernel directory, else None (one-unit backends)."""
    if spec in ("aten",) or spec.startswith("module:"):
        return None
    if spec == "triton":
        from opbench import kernels

        path = Path(kernels.__file__).parent
    else:
        path = Path(spec).expanduser()
    return DirectoryLayout(path.resolve(), kernel_version) if path.is_dir() else None
