"""Building and loading the C++ gate (``gate.cpp``) once per torch and Python version.

Why a build at first use and not a wheel: the gate links against the torch that runs it
(its C++ ABI changes between releases: 2.11 on the GPU machines, 2.13 here), and it needs
only a C++ compiler and ninja, which ``torch.utils.cpp_extension`` already requires for any
C++ kernel. The build takes 20-30 s (21 s on the 2-core CPU machine, 31 s on the GPU one)
and is cached under ``~/.cache/opbench/native/`` (``OPBENCH_NATIVE_DIR`` moves it); a later
process loads it in well under a second.

Where the gate cannot be built or loaded (no compiler, ``OPBENCH_NATIVE=0``), :func:`gate_module`
returns None and :func:`unavailable_reason` says why: the registry then registers the
Python path alone, exactly as before the gate existed.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import torch

from opbench.backends.serve_policy import dtype_names

__all__ = [
    "MODULE_NAME",
    "STALE_LOCK_S",
    "build_directory",
    "can_write",
    "dtype_of_code",
    "gate_module",
    "loaded_module",
    "native_enabled",
    "unavailable_reason",
    "wait_for_lock",
]

log = logging.getLogger(__name__)

_SOURCE = Path(__file__).with_name("gate.cpp")
#: the headers gate.cpp includes: torch's loader hashes only the sources it compiles, so
#: their digest goes into the build's flags, and a changed header rebuilds the gate
HEADERS = ("gate_driver.h", "gate_native.h", "gate_replay.h", "gate_replay_key.h", "gate_strided.h")
_lock = threading.Lock()
_state: dict[str, Any] = {}


def native_enabled() -> bool:
    """False when ``OPBENCH_NATIVE=0`` (or ``off``/``false``) turns the gate off."""
    return os.environ.get("OPBENCH_NATIVE", "1").strip().lower() not in ("0", "off", "false", "no")


#: the extension's module name: opbench's own, or a packaged backend's copy of this runtime
#: (``NAME._runtime.backends.native``): two copies in one process must not share a name,
#: or the second import would register its pybind11 classes twice
MODULE_NAME = __name__.split(".", 1)[0] + "_native_gate"


def build_directory() -> Path:
    """Where the gate is built: one folder per torch and Python version and module."""
    root = os.environ.get("OPBENCH_NATIVE_DIR")
    base = Path(root) if root else Path.home() / ".cache" / "opbench" / "native"
    tag = f"torch{torch.__version__}-py{sys.version_info[0]}{sys.version_info[1]}"
    return base / tag.replace("+", "_") / MODULE_NAME


def gate_module() -> Any | None:
    """The loaded extension, built on first use; None where it cannot be had (the reason
    is :func:`unavailable_reason`). Thread-safe; a failed build is not retried in the same
    process."""
    if not native_enabled():
        return None
    with _lock:
        if "module" in _state or "why" in _state:
            return _state.get("module")
        try:
            _state["module"] = _build()
        except Exception as e:  # a compiler error, no ninja, no compiler at all
            text = str(e).strip().splitlines()
            _state["why"] = (
                f"the C++ gate could not be built: {text[-1] if text else type(e).__name__}"
            )
            log.warning("%s; the backend registers its Python path only", _state["why"])
        return _state.get("module")


def loaded_module() -> Any | None:
    """The gate extension if this process has loaded it, else None; never builds (the
    worker's fingerprint reads it: :mod:`opbench.instrument.integrity`)."""
    return _state.get("module")


def unavailable_reason() -> str | None:
    """Why :func:`gate_module` returned None (None when the gate is loaded or not tried)."""
    if not native_enabled():
        return "turned off by OPBENCH_NATIVE=0"
    return _state.get("why")


#: Age (s) past which a build directory's ``lock`` is taken as left by a build that was
#: killed: torch's ``FileBaton`` waits for it forever, so every later process hung at its
#: first registered op (CI on 2026-11-29, after a run was killed mid-build). A build takes
#: 20-30 s.
STALE_LOCK_S = 300.0


def wait_for_lock(folder: Path, stale_s: float = STALE_LOCK_S, poll_s: float = 0.5) -> bool:
    """Wait while another process builds in ``folder`` (its ``lock`` file exists), as
    ``cpp_extension.load`` would, but remove a lock older than ``stale_s`` with a warning
    instead of waiting for it forever; True when one was removed."""
    lock = folder / "lock"
    while True:
        try:
            age = time.time() - lock.stat().st_mtime
        except FileNotFoundError:
            return False
        if age > stale_s:
            log.warning("removing %s, %.0f s old: a build that was killed left it", lock, age)
            lock.unlink(missing_ok=True)
            return True
        time.sleep(poll_s)


def can_write(folder: Path) -> bool:
    """Whether files can be made in ``folder``: tried, not asked (``os.access`` says yes to
    root on a read-only mount, such as the judge's sandbox)."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            return True
    except OSError:
        return False


def _readable_build(folder: Path) -> Path:
    """``folder``, or a private copy of it where it holds a finished build but cannot be
    written: ``cpp_extension.load`` takes a lock file in its build folder even to load, so
    a worker in the judge's sandbox (the file system read-only) could not load the gate
    the harness built. The copy keeps the files' times, so nothing is rebuilt."""
    if (folder / f"{MODULE_NAME}.so").exists() and not can_write(folder):
        copy = Path(tempfile.mkdtemp(prefix="opbench-native-")) / folder.name
        shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("lock"))
        log.info("loading the C++ gate from a copy of %s (read-only)", folder)
        return copy
    return folder


def _build() -> Any:
    from torch.utils import cpp_extension

    folder = build_directory()
    folder.mkdir(parents=True, exist_ok=True)
    wait_for_lock(folder)
    folder = _readable_build(folder)
    if not (folder / f"{MODULE_NAME}.so").exists():
        log.info("building opbench's C++ gate in %s (once per torch version)", folder)
    module = cpp_extension.load(
        name=MODULE_NAME,
        sources=[str(_SOURCE)],
        build_directory=str(folder),
        extra_cflags=["-O2", f"-DOPBENCH_GATE_HEADERS={_headers_digest()}"],
        with_cuda=False,
        verbose=False,
    )
    # one table both ways: the shape classes' dtype names for the gate, and the gate's
    # dtype codes (c10's ScalarType) for the compile callbacks
    names, dtypes = [], {}
    with warnings.catch_warnings():  # complex32 and the quantized dtypes warn on allocation
        warnings.simplefilter("ignore")
        for dtype, name in dtype_names().items():
            try:
                t = torch.empty(0, dtype=dtype)
            except (RuntimeError, TypeError):  # a dtype this build cannot allocate
                continue
            names.append((t, name))
            dtypes[module.dtype_code(t)] = dtype
    module.set_dtype_names(names)
    _state["dtypes"] = dtypes
    return module


def _headers_digest() -> str:
    """The first 16 hex digits of the SHA-256 of gate.cpp's headers, in order."""
    h = hashlib.sha256()
    for name in HEADERS:
        h.update(_SOURCE.with_name(name).read_bytes())
    return h.hexdigest()[:16]


def dtype_of_code() -> dict[int, torch.dtype]:
    """The torch dtype of each dtype code the loaded gate passes to a compile callback
    (empty before :func:`gate_module` has loaded it)."""
    return dict(_state.get("dtypes", {}))
