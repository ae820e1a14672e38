"""What one ``opbench run`` is set up with, and the checks before anything starts.

Runs in the HARNESS. Shared by both kinds of run: operator runs
(:mod:`opbench.run.session`) and program runs (:mod:`opbench.programs.runner`). It
imports neither, so the session can hand a program run to its runner without the
runner reaching back: the request (:class:`RunRequest`, :func:`is_program_run`), the
device and backend checks, the worker configuration, the CPU share, and opening the run
directory.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from opbench.run.store import ResultStore, StoreError

__all__ = [
    "RunError",
    "RunRequest",
    "check_backend_spec",
    "check_device",
    "cpu_share",
    "devices_for",
    "is_program_run",
    "judging_threads",
    "open_run_dir",
    "worker_config",
]


class RunError(RuntimeError):
    """A run that cannot start as asked (bad suite, no cases, a busy run directory...)."""


@dataclass
class RunRequest:
    suite: str = "smoke"
    backend: str = "aten"
    device: str = "cpu"
    ops: list[str] | None = None
    dtypes: list[str] | None = None
    limit_per_op: int | None = None
    profile: str = "quick"
    perf: bool = False
    out: Path | None = None
    #: worker slots; 0 (the default): one locally, one per GPU (CPU) of a Ray cluster
    workers: int = 0
    executor: str = "local"
    ray_address: str | None = None
    resume: bool = False
    seed: int = 0
    traces: str | None = None
    #: ``tuning`` | ``heldout``: one half of the traces (opbench.suites.trace_split)
    trace_split: str | None = None
    #: ``K/N``: part K of N of the selected tests (opbench.run.shards)
    shard: str | None = None
    test_timeout_s: float = 120.0
    max_crashes_per_op: int = 3
    sandbox: str = "off"
    kernel_version: str | None = None
    rtol_scale: float = 1.0
    atol_scale: float = 1.0
    allow_pytorch: bool = False
    #: call every kernel as its Python function, even where it declares a native launch
    #: that the C++ gate makes in a model (JudgeOptions.native_calls)
    python_calls: bool = False
    memory_limit_mb: int | None = None
    #: static-scan rules exempted with ``--allow RULE`` (recorded in the summary)
    allow_rules: list[str] = field(default_factory=list)
    rerun_failed: Path | None = None
    overhead_dominated: str = "include"
    #: float32 matmuls and convolutions may run in TF32 on both sides (off: IEEE float32)
    allow_tf32: bool = False
    # program problems (opbench.programs): --problem/--candidate, or a suite of them
    problem: Path | None = None
    candidate: Path | None = None
    candidates: Path | None = None
    levels: list[str] | None = None
    #: small | full (None: full on cuda, small on cpu)
    size: str | None = None
    compile_baseline: bool = False
    max_problem_bytes: int | None = None
    n_correctness: int = 5

    #: what must also match for ``--resume`` of a program run
    PROGRAM_IDENTITY = (
        "problem",
        "candidate",
        "candidates",
        "levels",
        "size",
        "compile_baseline",
        "n_correctness",
    )

    def identity(self) -> dict[str, Any]:
        """What must match for ``--resume`` to continue a run directory."""
        keep = (
            "suite",
            "backend",
            "device",
            "ops",
            "dtypes",
            "limit_per_op",
            "profile",
            "perf",
            "seed",
            "traces",
            "kernel_version",
            "rtol_scale",
            "atol_scale",
            "allow_pytorch",
            "allow_rules",
        )
        d = asdict(self)
        out = {k: d[k] for k in keep}
        if self.allow_tf32:  # only when set: run directories made before it still resume
            out["allow_tf32"] = True
        if self.trace_split:  # likewise
            out["trace_split"] = self.trace_split
        if self.python_calls:  # likewise
            out["python_calls"] = True
        if self.shard:  # likewise
            out["shard"] = self.shard
        if is_program_run(self):
            out.update(
                {k: (str(d[k]) if isinstance(d[k], Path) else d[k]) for k in self.PROGRAM_IDENTITY}
            )
        return out


def is_program_run(req: RunRequest) -> bool:
    """Whether a request asks for program problems (``--problem``, or ``--suite
    programs[:PATH]``) rather than operators: the one place that decides."""
    return req.problem is not None or req.suite.partition(":")[0] == "programs"


def devices_for(device: str, workers: int) -> list[str]:
    """Round-robin device list: ``cuda`` with 2 GPUs and 4 workers -> cuda:0, cuda:1, ..."""
    if device == "cuda":
        import torch

        n = torch.cuda.device_count()
        if n == 0:
            raise RunError("--device cuda, but no CUDA device is visible")
        return [f"cuda:{i % n}" for i in range(max(workers, 1))]
    return [device] * max(workers, 1)


def check_device(device: str) -> None:
    """Refuse, before anything starts, a device opbench does not judge on: it runs on
    ``cpu`` and NVIDIA ``cuda`` / ``cuda:N`` (the timing protocol, the guard and the
    sandbox are built and measured there); ``mps``, ``xpu`` and ROCm builds of PyTorch
    (whose ``cuda`` is HIP) are not supported."""
    import torch

    supported = "opbench runs on --device cpu, cuda or cuda:N (NVIDIA GPUs)"
    kind, _, index = device.partition(":")
    if kind not in ("cpu", "cuda") or (kind == "cpu" and index):
        raise RunError(f"--device {device!r} is not supported: {supported}")
    if kind == "cuda":
        if getattr(torch.version, "hip", None):
            raise RunError(f"this PyTorch is a ROCm build (HIP {torch.version.hip}): {supported}")
        if index and not index.isdigit():
            raise RunError(f"--device {device!r}: the GPU index must be a number ({supported})")
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if n == 0:
            raise RunError(f"--device {device}, but no CUDA device is visible")
        if index and int(index) >= n:
            raise RunError(f"--device {device}: only {n} CUDA device(s) are visible (cuda:0..)")


def check_backend_spec(spec: str) -> None:
    """Fail fast (before any worker starts) on a kernel directory that is not there."""
    if spec in ("aten", "triton") or spec.startswith("module:"):
        return
    path = Path(spec).expanduser()
    if path.is_dir():
        return
    if path.exists():
        raise RunError(
            f"--backend {spec!r} is a file; give the kernel directory that holds "
            "<op>/<op>_implementation.py folders"
        )
    raise RunError(
        f"--backend {spec!r}: no such kernel directory (or use aten, triton, module:NAME)"
    )


def open_run_dir(req: RunRequest) -> tuple[Path, ResultStore, set[str]]:
    """The run directory (``--out``, else ``runs/run-<time>``; created), its results
    store and the ids of the tests it already holds. Refuses a directory made by another
    request, and one that holds results unless ``--resume`` or ``--rerun-failed``
    asks to continue it."""
    out = Path(req.out or Path("runs") / time.strftime("run-%Y%m%d-%H%M%S")).resolve()
    out.mkdir(parents=True, exist_ok=True)
    store = ResultStore(out / "results.sqlite")
    try:
        store.check_same_run(req.identity())
    except StoreError as e:
        raise RunError(str(e)) from None
    done = store.finished_ids()
    if done and not req.resume and req.rerun_failed is None:
        raise RunError(
            f"{out} already holds {len(done)} results; pass --resume to continue it, "
            "or choose a new --out directory"
        )
    return out, store, done


def worker_config(req: RunRequest, judge_options: Any):
    """The :class:`~opbench.run.pool.WorkerConfig` of a run's workers: the request's
    backend, device and timing switch, ``judge_options`` (a
    :class:`~opbench.spec.judge_options.JudgeOptions`), each worker's share of the
    cores (local runs) and of the memory (60% of the machine's over the workers, unless
    ``--memory-limit-mb``), and spares per device (two on CUDA)."""
    from opbench.run.pool import WorkerConfig

    limit = req.memory_limit_mb
    if limit is None:
        try:
            total_kb = int(open("/proc/meminfo").read().split("MemTotal:")[1].split()[0])
            limit = int(total_kb / 1024 * 0.6 / max(req.workers, 1))
        except (OSError, IndexError, ValueError):
            limit = None
    timing_options: dict[str, Any] = {}
    return WorkerConfig(
        threads=cpu_share(req.workers) if req.executor == "local" else None,
        backend=req.backend,
        device=req.device,
        kernel_version=req.kernel_version,
        perf=req.perf,
        judge_options=asdict(judge_options),
        timing_options=timing_options,
        sandbox=req.sandbox,
        memory_limit_mb=limit,
        spare_workers=2 if req.device.startswith("cuda") else 1,
        allow_tf32=req.allow_tf32,
        env={"OPBENCH_PRELOAD": "opinfo"} if req.suite.startswith("opinfo") else {},
    )


@contextmanager
def judging_threads(workers: int | None) -> Iterator[None]:
    """The judging process's intra-op threads at its :func:`cpu_share` of ``workers``
    inside the block (unchanged where ``workers`` is None), restored after it."""
    import torch

    threads_before = torch.get_num_threads()
    if workers is not None:
        torch.set_num_threads(cpu_share(workers))
    try:
        yield
    finally:
        torch.set_num_threads(threads_before)


def cpu_share(workers: int) -> int:
    """Intra-op threads for each of ``workers`` workers and the judging process."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, cores // (max(workers, 1) + 1))
