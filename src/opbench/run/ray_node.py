"""The node side of ``--executor ray``: what runs inside each slot's Ray actor, and the
kernel directory shipped to it through the object store.

:class:`NodeWorkers` is the actor's body, a warm :class:`~opbench.run.pool.WorkerFactory`
on its node that relays loads and tests to its worker processes and returns their raw
reports; it runs no judge code and imports no candidate code. The harness side (slots,
remote workers, the executor) is :mod:`opbench.run.ray_executor`.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from opbench.run.pool import Outcome, WorkerConfig, WorkerStartError
from opbench.run.worker_process import GONE_DETAIL

log = logging.getLogger(__name__)

__all__ = ["MAX_SHIPPED_BYTES", "NodeWorkers", "pack_kernel_dir", "unpack_kernel_dir"]

#: Largest kernel directory shipped to the nodes (bytes); bigger ones must be on every node.
MAX_SHIPPED_BYTES = 64 << 20


def pack_kernel_dir(path: str | Path) -> dict[str, bytes]:
    """The files of a kernel directory (no caches), to recreate it on another node."""
    root = Path(path)
    files: dict[str, bytes] = {}
    total = 0
    for p in sorted(root.rglob("*")):
        if not p.is_file() or "__pycache__" in p.parts or p.suffix == ".pyc":
            continue
        data = p.read_bytes()
        total += len(data)
        if total > MAX_SHIPPED_BYTES:
            raise RuntimeError(
                f"kernel directory {root} is over {MAX_SHIPPED_BYTES >> 20} MB; "
                "put it on every node at the same path instead"
            )
        files[str(p.relative_to(root))] = data
    return files


def unpack_kernel_dir(files: dict[str, bytes], dest: Path) -> Path:
    for rel, data in files.items():
        target = (dest / rel).resolve()
        if not str(target).startswith(str(dest.resolve()) + os.sep):
            raise ValueError(f"refusing to write {rel!r} outside {dest}")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return dest


def _outcome_plain(o: Outcome) -> dict[str, Any]:
    """An outcome as Ray may carry it: the worker's message (tensors of any dtype) as the
    bytes it wrote (``Outcome.raw``), which the harness reads as it reads a local
    worker's (the actor asks its workers for ``run_case(raw=True)``). Ray's pickle cannot
    carry every tensor (complex32); reading the message here and writing it again cost
    the actor a decode and an encode of every output."""
    return {"kind": o.kind, "message": o.raw, "detail": o.detail, "stderr_tail": o.stderr_tail}


class NodeWorkers:
    """The body of one slot's Ray actor: a warm worker factory on its node.

    Holds a :class:`~opbench.run.pool.WorkerFactory` (fork server template, spares) for
    the whole run and the workers it handed out, by name; relays loads and tests to them
    and returns their answers as plain data. Runs no judge code and imports no
    candidate code. Start errors come back as ``{"start_error": ...}``.
    """

    def __init__(self, config: dict[str, Any], kernel_files: dict[str, bytes] | None) -> None:
        from opbench.run.bytecode_cache import use_bytecode_cache
        from opbench.run.pool import WorkerFactory

        use_bytecode_cache()  # a node's Ray processes do not inherit the harness's setting
        cfg = WorkerConfig(**config)
        # Ray gives this actor one GPU through CUDA_VISIBLE_DEVICES: it is cuda:0 here
        self.device = "cuda:0" if cfg.device.startswith("cuda") else "cpu"
        self.scratch = Path(tempfile.mkdtemp(prefix="opbench-ray-"))
        if kernel_files is not None:
            cfg.backend = str(unpack_kernel_dir(kernel_files, self.scratch / "kernels"))
        self.factory = WorkerFactory(cfg, self.scratch / "logs", spares=True)
        self.workers: dict[str, Any] = {}

    def warm(self) -> None:
        """Start this node's fork server template and a spare now, in the background,
        while the harness still builds and plans (``WorkerFactory.warm``; the slot's
        first ``get`` waits for that spare). A failure is the first ``get``'s to report."""
        self.factory.warm(self.device)

    def ready(self) -> dict[str, Any]:
        import ray

        return {
            "node": os.uname().nodename,
            # two Ray nodes may share a host (the one-host rehearsal): Ray's id tells them apart
            "ray_node": ray.get_runtime_context().get_node_id(),
            "pid": os.getpid(),
            "gpus": os.environ.get("CUDA_VISIBLE_DEVICES"),
        }

    def get(self, unit: tuple[str, ...] | None) -> dict[str, Any]:
        try:
            w = self.factory.get(self.device, unit)
        except WorkerStartError as e:
            return {"start_error": str(e)}
        self.workers[w.name] = w
        return {
            "name": w.name,
            "sandbox_level": w.sandbox_level,
            "preload_unit": w.preload_unit,
            "preload_result": w.preload_result,
            "unit": w.unit,
            "loaded_info": w.loaded_info,
        }

    def load(self, name: str, unit: tuple[str, ...] | None) -> dict[str, Any]:
        try:
            return self.workers[name].load(unit)
        except WorkerStartError as e:
            return {"start_error": str(e)}
        finally:
            self._forget_dead(name)

    def run_case(
        self, name: str, case: dict[str, Any], timeout_s: float, plan: dict[str, Any] | None
    ) -> dict[str, Any]:
        w = self.workers.get(name)
        if w is None:  # it died after its last answer and was forgotten
            return {"kind": "gone", "message": None, "detail": GONE_DETAIL, "stderr_tail": ""}
        try:
            return _outcome_plain(w.run_case(case, timeout_s, plan, raw=True))
        finally:
            self._forget_dead(name)

    def _forget_dead(self, name: str) -> None:
        """A worker that crashed, hung or failed to load is gone (the harness drops it)."""
        w = self.workers.get(name)
        if w is not None and not w.alive():
            self.workers.pop(name, None)

    def end(self, name: str, how: str) -> None:
        """``retire``, ``stop`` or ``kill`` a worker, and forget it."""
        w = self.workers.pop(name, None)
        if w is not None:
            getattr(w, how)()

    def preload(self, unit: tuple[str, ...]) -> None:
        self.factory.preload(self.device, unit)

    def close(self) -> dict[str, Any] | None:
        """Stop every worker and the factory; the backend settings its workers read."""
        for w in list(self.workers.values()):
            w.kill()
        self.workers.clear()
        self.factory.close()
        settings = self.factory.backend_settings()
        shutil.rmtree(self.scratch, ignore_errors=True)
        return settings
