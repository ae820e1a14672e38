"""``load_backend``: the one entry point that turns a ``--backend`` spec into a
:class:`~opbench.backends.base.Backend` (re-exported here with :class:`BackendError`).

Specs: ``aten`` (PyTorch itself), a kernel directory path (BackendBench layout), or
``module:NAME[:FUNC]`` (an installed package that registers its own kernels through
``torch.library`` when ``NAME.FUNC()`` is called). This runs inside the worker: the
harness never loads a candidate backend.
"""

from __future__ import annotations

import os
from pathlib import Path

from opbench.backends.base import Backend, BackendError

__all__ = ["Backend", "BackendError", "load_backend", "reference_kernels_folder"]


def load_backend(
    spec: str,
    device: str,
    *,
    kernel_version: str | None = None,
    only: set[str] | None = None,
) -> Backend:
    """``aten`` | a kernel directory | ``module:NAME[:FUNC]`` -> a loaded :class:`Backend`.

    ``only``: the folders of a kernel directory to import (one isolation unit, see
    :mod:`opbench.backends.units`); None imports them all.
    Raises :class:`BackendError` for an unknown spec or a missing directory; problems
    with single kernels go to ``backend.load_errors`` and the rest still loads.
    """
    spec = (spec or "").strip()
    if spec == "aten":
        from opbench.backends.aten import AtenBackend

        return AtenBackend(device)
    if spec.startswith("module:"):
        from opbench.backends.module import ModuleBackend

        rest = spec[len("module:") :]
        name, _, func = rest.partition(":")
        if not name:
            raise BackendError(
                "module backend needs a package name: --backend module:NAME[:FUNC] "
                "(e.g. module:flag_gems:enable)"
            )
        return ModuleBackend(name, func or "enable", device)
    if spec == "triton":
        if str(device).startswith("cpu"):
            # in-process use on a CPU (opbench.enable, check-model): the kernels run
            # under Triton's interpreter, chosen when their @jit functions are defined
            os.environ.setdefault("TRITON_INTERPRET", "1")

        path = reference_kernels_folder()
        if not any(p.is_dir() and any(p.glob("*_implementation*.py")) for p in path.iterdir()):
            raise BackendError(
                "the reference Triton backend (opbench.kernels) holds no kernels in this install"
            )
        spec = str(path)
    if str(device).startswith("cpu"):  # bfloat16 stores rounded under the interpreter as on a GPU
        from opbench.instrument.interpreter_rounding import install_if_interpreting

        install_if_interpreting()
    path = Path(spec).expanduser()
    if path.is_dir():
        from opbench.backends.directory import DirectoryBackend

        return DirectoryBackend(path, device, kernel_version=kernel_version, only=only)
    if path.exists():
        raise BackendError(
            f"backend {spec!r} is a file; give the kernel directory that holds "
            "<op>/<op>_implementation.py folders"
        )
    if "/" in spec or "\\" in spec or spec.startswith("."):
        raise BackendError(f"backend directory {spec!r} does not exist")
    raise BackendError(
        f"unknown backend {spec!r}: use aten, triton, a kernel directory path, "
        "or module:NAME[:FUNC]"
    )


def reference_kernels_folder() -> Path:
    """The folder of the reference Triton backend (``--backend triton``): opbench.kernels."""
    from opbench import kernels

    return Path(kernels.__file__).parent
