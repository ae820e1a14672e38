"""``opbench package DIR --name NAME -o OUT``: a pip-installable backend from a kernel
directory, needing only PyTorch (and what its kernels import) at run time.

The package holds a copy of the kernel folders (``NAME/kernels/``), the registration
runtime (``NAME/_runtime/``: opbench's own kernel-directory backend, variant derivation
and ``torch.library`` registry, copied from this install's source with only their import
paths rewritten, so the package and opbench never drift) and a small ``__init__`` with
``enable(device=None)``, ``disable()``, ``backend(device=None)`` (a context manager),
``call_counts()`` and ``served_ops()``. Kernels that import ``opbench.kernels`` (the
reference Triton backend's shared code) get that code vendored under ``NAME/kernels/``.
Its dependencies are ``torch`` plus what the kernel files import (read from their
``import`` statements, mapped to distributions where this environment knows them).
Because it registers through ``torch.library``, the same package can be judged as
``--backend module:NAME``.
"""

from __future__ import annotations

import ast
import keyword
import re
import shutil
import sys
from importlib import metadata
from pathlib import Path

__all__ = ["build_package", "PackageError"]

_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class PackageError(ValueError):
    """Bad input for ``opbench package`` (one line, actionable)."""


_INIT = '''"""{name}: PyTorch operator kernels, registered through torch.library.

    import {name}
    {name}.enable()            # or enable("cpu")
    ...                        # every model in this process now runs on these kernels
    {name}.disable()

    with {name}.backend("cuda"):
        model(x)

Packaged by ``opbench package``; needs only torch (and what the kernels import).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from {name}._runtime.backends import registry
from {name}._runtime.backends.directory import DirectoryBackend
from {name}._runtime.backends.serve_policy import ServePolicy

__version__ = "{version}"
KERNEL_DIR = Path(__file__).resolve().parent / "kernels"
_active = []


def _load(device, kernel_version):
    if str(device or registry.default_device()).startswith("cpu"):
        import os

        # Triton kernels run on CPU tensors only under Triton's interpreter, chosen when
        # their @jit functions are defined
        os.environ.setdefault("TRITON_INTERPRET", "1")
    return DirectoryBackend(
        KERNEL_DIR, str(device or registry.default_device()), kernel_version=kernel_version
    )


def policy():
    """The serve policy packed with these kernels (``opbench package --from-run``): only
    the operators and shape classes where a judged run found them faster than eager are
    served; None when the package serves every kernel."""
    path = Path(__file__).resolve().parent / "serve_policy.json"
    return ServePolicy.load(path) if path.exists() else None


def enable(device=None, *, kernel_version=None, ops=None, serve_all=False):
    """Register the kernels for ``device`` (cpu or cuda; default cuda when available);
    ``serve_all``: ignore the packed serve policy and register every kernel."""
    be = registry.enable(
        _load(device, kernel_version), device, ops=ops, policy=None if serve_all else policy()
    )
    _active.append(be)
    return be


def disable():
    """Remove this package's registrations (other backends stay)."""
    while _active:
        registry.disable(_active.pop())


@contextlib.contextmanager
def backend(device=None, *, kernel_version=None, ops=None, serve_all=False):
    """``with {name}.backend("cuda"): ...`` -- registered inside the block only."""
    be = enable(device, kernel_version=kernel_version, ops=ops, serve_all=serve_all)
    try:
        yield be
    finally:
        if be in _active:
            _active.remove(be)
        registry.disable(be)


def served_ops(device=None):
    """The ATen overloads these kernels serve (their in-place and out= variants included)."""
    return sorted(_load(device, None).served_ops())


def call_counts():
    """Per op: calls served by these kernels and calls that fell back to PyTorch."""
    return registry.call_counts()
'''

_PYPROJECT = """[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "{dist}"
version = "{version}"
description = "PyTorch operator kernels (packaged by opbench; needs only torch)"
requires-python = ">=3.10"
dependencies = [{deps}]

[tool.setuptools]
packages = [
    "{name}", "{name}._runtime", "{name}._runtime.spec", "{name}._runtime.backends",
    "{name}._runtime.backends.native",
]
package-dir = {{"" = "src"}}

[tool.setuptools.package-data]
{name} = [{patterns}]
"{name}._runtime.backends.native" = ["gate.cpp", "gate_*.h"]
"""


#: opbench's modules the package's registration runs on, copied as they are in this install
#: (only ``opbench.spec``/``opbench.backends`` import paths are rewritten): the
#: kernel-directory backend, variant derivation and the torch.library registry import nothing
#: else of opbench (tests/backends/test_packaging_and_trace.py checks that they stay so).
RUNTIME_MODULES = (
    "spec/ops.py",
    "spec/variants.py",
    "backends/base.py",
    "backends/units.py",
    "backends/directory.py",
    "backends/registry.py",
    "backends/serve_policy.py",
    "backends/native/__init__.py",
    "backends/native/build.py",
    "backends/native/gates.py",
    "backends/native/replay.py",
    "backends/native/spec.py",
    "backends/native/gate.cpp",
    "backends/native/gate_driver.h",
    "backends/native/gate_native.h",
    "backends/native/gate_replay.h",
    "backends/native/gate_replay_key.h",
    "backends/native/gate_strided.h",
)
_OPBENCH = Path(__file__).resolve().parents[1]
_OPBENCH_IMPORT = re.compile(r"\bopbench\.(spec|backends)\b")
_KERNELS_IMPORT = re.compile(r"\bopbench\.kernels\b")


def _copy_runtime(pkg: Path, name: str) -> None:
    runtime = pkg / "_runtime"
    for sub in ("", "spec", "backends", "backends/native"):
        (runtime / sub).mkdir(parents=True, exist_ok=True)
        (runtime / sub / "__init__.py").write_text(
            f'"""Registration runtime of {name}, copied from opbench by `opbench package`."""\n'
        )
    for rel in RUNTIME_MODULES:
        text = (_OPBENCH / rel).read_text()
        text = _OPBENCH_IMPORT.sub(lambda m: f"{name}._runtime.{m.group(1)}", text)
        comment = "//" if rel.endswith((".cpp", ".h")) else "#"
        banner = (
            f"{comment} Copied from opbench's src/opbench/{rel} by `opbench package`; "
            "regenerate the package rather than editing this file.\n"
        )
        (runtime / rel).write_text(banner + text)


def _imports(path: Path) -> set[str]:
    """Absolute module names a file imports (top-level ``import``/``from`` statements
    and those inside functions alike)."""
    try:
        tree = ast.parse(path.read_text(), str(path))
    except (SyntaxError, UnicodeDecodeError):
        return set()
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module)
    return out


def _dependencies(files: list[Path], name: str) -> list[str]:
    """``torch`` plus the distributions of what the kernel files import."""
    local = {f.stem for f in files}  # sibling helper modules, imported by plain name
    tops = {m.split(".", 1)[0] for f in files for m in _imports(f)}
    tops -= set(sys.stdlib_module_names) | local | {name, "torch", "__future__"}
    try:
        dists = metadata.packages_distributions()
    except Exception:  # an environment whose metadata cannot be read
        dists = {}
    deps = {"torch"}
    for top in sorted(tops):
        deps.add((dists.get(top) or [top])[0])
    return sorted(deps)


def _vendor_kernel_helpers(kernels: Path, name: str, files: list[Path]) -> list[Path]:
    """Kernels that import ``opbench.kernels`` (the reference backend's shared code)
    get that code copied beside them, and every import of it pointed there. Any other
    import of opbench cannot be packaged."""
    uses = False
    for f in files:
        for m in _imports(f):
            if m == "opbench" or m.startswith("opbench."):
                if m == "opbench.kernels" or m.startswith("opbench.kernels."):
                    uses = True
                else:
                    raise PackageError(
                        f"{f.relative_to(kernels)} imports {m}: a packaged backend cannot "
                        "depend on opbench (only opbench.kernels, which is copied along)"
                    )
    if not uses:
        return files
    lib = kernels / "_lib"
    if not lib.exists():
        shutil.copytree(
            _OPBENCH / "kernels" / "_lib", lib, ignore=shutil.ignore_patterns("__pycache__")
        )
    (kernels / "__init__.py").write_text(f'"""{name}\'s kernels."""\n')
    files = sorted(set(files) | set(lib.glob("*.py")))
    for f in files:
        text = f.read_text()
        if _KERNELS_IMPORT.search(text):
            f.write_text(_KERNELS_IMPORT.sub(f"{name}.kernels", text))
    return files


def build_package(
    kernel_dir: str | Path,
    name: str,
    out: str | Path,
    *,
    version: str = "0.1.0",
    force: bool = False,
    from_run: str | Path | None = None,
    measure: str = "host",
    min_speedup: float = 1.0,
) -> Path:
    """Lay out an installable package for ``kernel_dir`` in ``out``; returns ``out``.

    Only kernel folders' ``.py`` files are copied (no caches). ``out`` must not exist
    unless ``force``. ``from_run``: a judged run of these kernels; the package then carries
    ``serve_policy.json`` (:func:`opbench.backends.serve_policy.policy_from_run` with
    ``measure`` and ``min_speedup``) and its ``enable()`` serves only where they won.
    """
    policy = None
    if from_run is not None:
        from opbench.backends.serve_policy import policy_from_run

        try:
            policy = policy_from_run(from_run, measure=measure, min_speedup=min_speedup)
        except (FileNotFoundError, ValueError) as e:
            raise PackageError(f"--from-run: {e}") from None
    src = Path(kernel_dir)
    if not src.is_dir():
        raise PackageError(f"kernel directory {str(kernel_dir)!r} does not exist")
    if not _NAME_RE.match(name) or keyword.iskeyword(name):
        raise PackageError(f"--name {name!r} must be a Python identifier (e.g. my_kernels)")
    out = Path(out)
    if out.exists():
        if not force:
            raise PackageError(f"{out} already exists; remove it or pass --force")
        shutil.rmtree(out)
    folders = [
        p for p in sorted(src.iterdir()) if p.is_dir() and not p.name.startswith((".", "__"))
    ]
    if not folders:
        raise PackageError(f"{src} holds no kernel folders (<op>/<op>_implementation.py)")
    pkg = out / "src" / name
    kernels = pkg / "kernels"
    depth = 1
    for folder in folders:
        for f in folder.rglob("*.py"):
            if "__pycache__" in f.parts:
                continue
            rel = f.relative_to(src)
            depth = max(depth, len(rel.parts) - 1)
            dest = kernels / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, dest)
    copied = sorted(p for p in kernels.rglob("*.py") if "__pycache__" not in p.parts)
    copied = _vendor_kernel_helpers(kernels, name, copied)
    deps = _dependencies(copied, name)
    _copy_runtime(pkg, name)
    (pkg / "__init__.py").write_text(_INIT.format(name=name, version=version))
    if policy is not None:
        from opbench.backends.serve_policy import POLICY_FILE

        (pkg / POLICY_FILE).write_text(policy.to_json())
    patterns = ", ".join(f'"kernels/{"*/" * d}*.py"' for d in range(0, depth + 1))
    patterns += ', "serve_policy.json"'
    (out / "pyproject.toml").write_text(
        _PYPROJECT.format(
            dist=name.replace("_", "-"),
            name=name,
            version=version,
            patterns=patterns,
            deps=", ".join(f'"{d}"' for d in deps),
        )
    )
    (out / "README.md").write_text(
        f"# {name}\n\nKernels packaged by `opbench package`.\n\n"
        f"```python\nimport {name}\n{name}.enable()  # or: with {name}.backend('cuda'): ...\n```\n"
        f"\nIt needs only {', '.join(deps)} at run time (opbench is not a dependency).\n"
        f"\nJudge it: `opbench run --suite traces --backend module:{name}`.\n"
    )
    return out
