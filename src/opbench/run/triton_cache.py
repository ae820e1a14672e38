"""Triton's compiled kernels kept between runs, one folder per isolation unit. Runs in the
HARNESS; the worker only points ``TRITON_CACHE_DIR`` where the load message says.

Why: a GPU worker compiles every Triton kernel its unit uses (a second or more each, and
Triton also builds a C launcher per kernel signature with the system compiler), and a
sandboxed worker's cache lived in its private ``/tmp``, gone with it: every run of a
backend paid every compile again (146 s of a 269 s traces run on the H100 went outside
tests).

How it stays safe: what one unit's code compiled is only ever served to that same unit
again. The harness picks the worker's cache folder (a fresh name in the worker's
``/tmp``), seeds it from ``<cache>/triton/<backend>/<unit>/`` before the load, and when
the worker is gone copies back only new regular files laid out as Triton lays them out
(``<key>/<file>``, no links, bounded in size) into that unit's own folder, never over a
file already there. A candidate that writes a forged binary into its cache forges only
its own later runs, which it could do at run time anyway; Triton's keys (source hash,
options, versions, target) decide whether an entry is used, so a changed kernel never
meets a stale binary.

Triton's own helper module (``cuda_utils``, built from Triton's C source) is shared
instead: the harness builds it in its own process (:func:`driver_folder`), and every
worker's folder is seeded with it, so a new unit does not run the system compiler for it.

Known limit: workers forked from one template share the template's ``/tmp`` (see
:mod:`opbench.run.forkserver`), so a unit running at the same time could write into
another's folder before it is copied back. ``--workers 1`` or a backend's units run
apart close that gap; starting workers anew (``OPBENCH_FORK_SERVER=0``) does too.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import secrets
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from opbench.cache import cache_dir

log = logging.getLogger(__name__)

__all__ = ["UnitCache", "driver_folder", "prune", "unit_folder"]

#: Triton's layout: one folder per cache key, files named by kernel and stage.
_KEY = re.compile(r"^[A-Za-z0-9_-]{8,128}$")
_FILE = re.compile(r"^[A-Za-z0-9_.-]{1,200}$")
#: What one unit may add to its folder in one worker's life.
MAX_HARVEST_BYTES = 512 << 20
#: Unit folders kept per backend, newest first: a Scorer lane holds one candidate source
#: after another, and an RL run's every source would otherwise stay on disk.
MAX_UNIT_FOLDERS = 256
#: Triton's group files name their members by absolute path: kept with this in place of
#: the worker's folder, which each new worker's seed puts back.
_ROOT = "@OPBENCH_TRITON_ROOT@"


def unit_folder(backend: str, unit: tuple[str, ...] | None) -> Path:
    """Where a unit's compiled kernels are kept: by the backend's resolved path (two
    backends never share a folder), the unit's operator folders, and what those folders
    hold (a Scorer lane's folder holds one candidate after another: a candidate is served
    only what the same source compiled)."""
    backend_key = hashlib.sha256(os.path.realpath(backend).encode()).hexdigest()[:16]
    slug = "+".join(unit) if unit else "all"
    slug = re.sub(r"[^A-Za-z0-9_.+-]", "_", slug)[:100]
    return cache_dir() / "triton" / backend_key / f"{slug}-{_source_key(backend, unit)}"


def _source_key(backend: str, unit: tuple[str, ...] | None) -> str:
    """A hash of the unit's files (the whole backend's for ``None``), names and bytes."""
    root = Path(backend)
    folders = [root / name for name in unit] if unit else [root]
    h = hashlib.sha256()
    for folder in folders:
        if not folder.is_dir():
            continue
        for path in sorted(folder.rglob("*")):
            if "__pycache__" in path.parts or not path.is_file() or path.is_symlink():
                continue
            h.update(str(path.relative_to(root)).encode() + b"\0")
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


_DRIVER_LOCK = threading.Lock()
_driver_built: dict[Path, bool] = {}


def driver_folder() -> Path | None:
    """Triton's own helper module (``cuda_utils``, C built with the system compiler),
    built by the harness, where no candidate code runs, once per machine and Triton
    version: every worker's folder is seeded with it. A unit's folder is new for every
    new source (each candidate a Scorer judges), and without this its first worker built
    the module again before its first launch. None where it cannot be built (no GPU
    driver, no Triton)."""
    try:
        import triton
    except ImportError:
        return None
    folder = cache_dir() / "triton" / f"driver-{triton.__version__}"
    with _DRIVER_LOCK:
        if folder not in _driver_built:
            _driver_built[folder] = _has_module(folder) or _build_driver(folder)
        return folder if _driver_built[folder] else None


def _has_module(folder: Path) -> bool:
    return folder.is_dir() and any(folder.glob("*/*.so"))


def _build_driver(folder: Path) -> bool:
    """In a fresh interpreter of ours (never candidate code), with ``TRITON_CACHE_DIR``
    set for it alone: changing this process's environment would reach the workers that
    other threads start meanwhile."""
    env = dict(os.environ, TRITON_CACHE_DIR=str(folder))
    env.pop("TRITON_INTERPRET", None)
    code = "from triton.runtime import driver\ndriver.active.utils\n"
    try:
        r = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        log.info("Triton's driver module not built in the harness: %s", e)
        return False
    if r.returncode != 0:  # no driver here: workers build their own, as before
        log.info("Triton's driver module not built in the harness: %s", r.stderr[-300:])
        return False
    return _has_module(folder)


class UnitCache:
    """The cache folder of one worker judging one unit: where the worker sees it
    (``worker_path``), where the harness reads it (``host_path``), and the unit's
    persistent folder (``kept``)."""

    def __init__(
        self,
        backend: str,
        unit: tuple[str, ...] | None,
        host_tmp: str,
        driver: Path | None = None,
    ) -> None:
        """``host_tmp``: the host folder the worker sees as ``/tmp`` (its sandbox's
        private folder, or ``/tmp`` itself when it runs unsandboxed). ``driver``: the
        harness-built :func:`driver_folder`, seeded into the worker's folder too."""
        name = f"opbench-triton-{secrets.token_hex(8)}"
        self.worker_path = f"/tmp/{name}"
        self.host_path = Path(host_tmp) / name
        self.kept = unit_folder(backend, unit)
        self.driver = driver

    def seed(self) -> int:
        """Copy the harness-built driver module and the unit's kept kernels into the
        worker's folder; the number of files."""
        self.host_path.mkdir(parents=True, exist_ok=True)
        copied = 0
        if self.driver is not None and self.driver.is_dir():
            copied += _copy_entries(self.driver, self.host_path, limit=None, group=lambda p: None)
        if self.kept.is_dir():
            os.utime(self.kept)  # used now: pruning removes the least recently used first
            copied += _copy_entries(
                self.kept,
                self.host_path,
                limit=None,
                group=lambda p: p.replace(_ROOT, self.worker_path, 1),
            )
        return copied

    def _driver_keys(self) -> set[str]:
        if self.driver is None or not self.driver.is_dir():
            return set()
        return {e.name for e in os.scandir(self.driver)}

    def harvest(self) -> int:
        """After the worker is gone: keep what it compiled that the unit's folder lacks,
        then remove the worker's folder. The number of files kept."""
        try:
            if not self.host_path.is_dir() or self.host_path.is_symlink():
                return 0
            kept = _copy_entries(
                self.host_path,
                self.kept,
                limit=MAX_HARVEST_BYTES,
                group=self._portable,
                skip=self._driver_keys(),  # the harness's own build, kept apart
            )
            if kept:
                prune(self.kept.parent, MAX_UNIT_FOLDERS)
            return kept
        except OSError as e:  # a full disk costs a later compile, never the run
            log.warning("could not keep compiled kernels in %s: %s", self.kept, e)
            return 0
        finally:
            shutil.rmtree(self.host_path, ignore_errors=True)

    def _portable(self, path: str) -> str | None:
        """A group member's path as kept: inside this worker's folder, one key deep."""
        rel = os.path.relpath(os.path.normpath(path), self.worker_path)
        parts = rel.split(os.sep)
        if len(parts) != 2 or not (_KEY.match(parts[0]) and _FILE.match(parts[1])):
            return None
        return f"{_ROOT}/{parts[0]}/{parts[1]}"


def prune(backend_folder: Path, keep: int) -> int:
    """Remove all but the ``keep`` most recently used unit folders of one backend; the
    number removed. A folder being copied from while it goes costs that worker a compile."""
    try:
        folders = [e for e in os.scandir(backend_folder) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return 0
    folders.sort(key=lambda e: e.stat(follow_symlinks=False).st_mtime, reverse=True)
    for old in folders[keep:]:
        shutil.rmtree(old.path, ignore_errors=True)
    return max(0, len(folders) - keep)


def _rewrite_group(data: bytes, group: Callable[[str], str | None]) -> bytes | None:
    """A Triton group file with each member path mapped by ``group`` (None: drop it)."""
    try:
        members = json.loads(data)["child_paths"]
        mapped = {str(k): group(str(v)) for k, v in members.items()}
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    if any(v is None for v in mapped.values()):
        return None
    return json.dumps({"child_paths": mapped}).encode()


def _copy_entries(
    src: Path,
    dst: Path,
    limit: int | None,
    group: Callable[[str], str | None],
    skip: set[str] = frozenset(),  # type: ignore[assignment]
) -> int:
    """Copy ``src/<key>/<file>`` regular files that ``dst`` lacks, each through a
    temporary name and a rename (a reader never sees half a file); Triton's group files
    (``__grp__*``) go through ``group``, which maps their member paths. Anything else in
    ``src`` (links, deeper folders, odd names) is skipped."""
    copied = 0
    total = 0
    with os.scandir(src) as keys:
        for key in keys:
            if key.name in skip or not (_KEY.match(key.name) and key.is_dir(follow_symlinks=False)):
                continue
            with os.scandir(key.path) as files:
                for f in files:
                    if not (_FILE.match(f.name) and f.is_file(follow_symlinks=False)):
                        continue
                    target = dst / key.name / f.name
                    if target.exists():
                        continue
                    size = f.stat(follow_symlinks=False).st_size
                    if limit is not None and total + size > limit:
                        log.warning("compiled kernels over %d bytes: the rest not kept", limit)
                        return copied
                    target.parent.mkdir(parents=True, exist_ok=True)
                    tmp = target.with_name(f".{f.name}.{secrets.token_hex(4)}")
                    fd = os.open(f.path, os.O_RDONLY | os.O_NOFOLLOW)
                    with os.fdopen(fd, "rb") as r:
                        data = r.read(size + 1)
                    if f.name.startswith("__grp__"):
                        data = _rewrite_group(data, group)
                        if data is None:
                            continue
                    tmp.write_bytes(data)
                    os.replace(tmp, target)
                    total += size
                    copied += 1
    return copied
