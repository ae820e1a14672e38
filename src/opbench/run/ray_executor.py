"""Scale past one machine: case batches as Ray tasks, results judged and stored here.

Each Ray task asks for one GPU (``--device cuda``) or one CPU, starts an ordinary
:class:`~opbench.run.pool.WorkerProcess` on its node (so isolation, the sandbox,
timeouts and the memory limit are exactly those of a local run), feeds it the batch,
replaces it when it dies, and returns what the worker said as plain data. The task
never imports candidate code, and neither does this process: results come back through
``ray.wait`` as they finish, are judged by the trusted judge here, and are written into
the run's own results store, so ``--resume`` works the same as with the local executor.

A kernel directory backend is shipped to the nodes through the object store (its files,
not a path), so a cluster needs no shared file system; opbench itself (and torch) must
be installed on every node. ``--ray-address`` connects to an existing cluster
(``ray://HOST:10001`` or ``HOST:6379``); without it a local Ray is started, or the one
already initialised in this process is used.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from opbench.run.executor import (
    CrashBudget,
    judge_outcome,
    not_run_result,
    with_hidden_run_dir,
)
from opbench.run.isolation import IsolationPlanner
from opbench.run.judge_errors import judge_error_result
from opbench.run.pool import Outcome, WorkerConfig
from opbench.run.store import ResultStore, TestResult
from opbench.suites.case import Case

log = logging.getLogger(__name__)

#: Largest kernel directory shipped to the nodes (bytes); bigger ones must be on every node.
MAX_SHIPPED_BYTES = 64 << 20
#: Tests per Ray task: large enough to amortise a worker start, small enough to spread.
DEFAULT_BATCH = 16


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
    return {"kind": o.kind, "message": o.message, "detail": o.detail, "stderr_tail": o.stderr_tail}


def _unit_plain(info: dict[str, Any] | None) -> dict[str, Any] | None:
    """What the harness needs of a worker's import report (not its served list)."""
    if not info:
        return None
    return {
        k: info.get(k) for k in ("import_tamper", "import_observed", "import_neighbours", "unit")
    }


def run_batch(
    config: dict[str, Any],
    kernel_files: dict[str, bytes] | None,
    cases: list[dict[str, Any]],
    timeout_s: float,
    max_crashes: int,
    prior_crashes: dict[str, list[str]],
    units: list[list[str] | None] | None = None,
    plans: list[dict[str, Any] | None] | None = None,
) -> dict[str, Any]:
    """The body of one Ray task: run ``cases`` on local workers, return plain outcomes.

    ``units``: each case's isolation unit (a worker imports one unit's code; a new one
    is started when the unit changes); ``plans``: each case's trial plan, made by the
    harness. ``prior_crashes``: crash kinds already seen per op in the run, so the
    per-op crash budget holds across tasks. Tests past the budget come back as
    ``not_run``.
    """
    from opbench.run.pool import WorkerFactory, WorkerStartError

    device = config["device"]
    if device.startswith("cuda"):
        device = "cuda:0"  # Ray sets CUDA_VISIBLE_DEVICES to the GPU it gave this task
    scratch = Path(tempfile.mkdtemp(prefix="opbench-ray-"))
    cfg = WorkerConfig(**config)
    if kernel_files is not None:
        cfg.backend = str(unpack_kernel_dir(kernel_files, scratch / "kernels"))
    budget = CrashBudget(max_crashes)
    for op, kinds in prior_crashes.items():
        for kind in kinds:
            budget.record(op, kind)
    # spares: a task starts a worker per isolation unit; a warm one hides the start
    factory = WorkerFactory(cfg, scratch / "logs", spares=True)
    out: dict[str, Any] = {
        "results": [],
        "sandbox_level": None,
        "worker_info": {},
        "node": os.uname().nodename,
    }
    worker = None
    units = units or [None] * len(cases)
    plans = plans or [None] * len(cases)
    try:
        for cd, unit_list, plan in zip(cases, units, plans):
            op = cd["op"]
            unit = tuple(unit_list) if unit_list is not None else None
            exhausted, kind = budget.exhausted(op)
            if exhausted:
                out["results"].append({"case": cd, "not_run": kind, "worker": ""})
                continue
            if worker is not None and (not worker.alive() or worker.unit != unit):
                worker.retire()
                worker = None
            if worker is None:
                try:
                    worker = factory.get(device)
                    info = worker.load(unit)
                except WorkerStartError as e:
                    out["fatal"] = str(e)
                    break
                out["sandbox_level"] = worker.sandbox_level
                if info.get("type") == "load_failed":
                    worker = None
                    budget.record(op, info["kind"])
                    failed = Outcome(
                        info["kind"],
                        detail=f"the worker died importing the kernel: {info['detail']}",
                        stderr_tail=info.get("stderr_tail", ""),
                    )
                    out["results"].append(
                        {"case": cd, "outcome": _outcome_plain(failed), "worker": ""}
                    )
                    continue
                errors = out["worker_info"].setdefault("load_errors", {})
                errors.update(info.get("load_errors") or {})
            outcome = worker.run_case(cd, timeout_s, plan)
            name = worker.name
            unit_info = worker.loaded_info
            if outcome.kind in ("crash", "timeout", "oom"):
                budget.record(op, outcome.kind)
                worker = None
            out["results"].append(
                {
                    "case": cd,
                    "outcome": _outcome_plain(outcome),
                    "worker": name,
                    "unit_info": _unit_plain(unit_info),
                }
            )
    finally:
        if worker is not None:
            worker.stop()
        factory.close()
        found = factory.backend_settings()
        if found is not None:
            out["worker_info"]["backend_settings"] = found
        import shutil

        shutil.rmtree(scratch, ignore_errors=True)
    return out


def batches(
    cases: Sequence[Case], size: int, unit_of: Callable[[str], Any] | None = None
) -> Iterator[list[Case]]:
    """Cases of one isolation unit (else one op) together, at most ``size`` per batch
    (so a crashing op's budget applies in-task, and a task starts few workers)."""
    key = unit_of or (lambda op: op)
    groups: dict[str, list[Case]] = {}
    for c in cases:
        groups.setdefault(repr(key(c.op)), []).append(c)
    batch: list[Case] = []
    batch_key = None
    for k, group in groups.items():
        for c in group:
            if batch and (len(batch) >= size or k != batch_key and len(batch) >= size // 2):
                yield batch
                batch = []
            batch.append(c)
            batch_key = k
    if batch:
        yield batch


class RayExecutor:
    """Runs cases as Ray tasks and stores each result as it streams back."""

    def __init__(
        self,
        worker_config: WorkerConfig,
        req: Any,
        store: ResultStore,
        judge_options: Any,
        planner: IsolationPlanner | None = None,
    ) -> None:
        self.planner = planner or IsolationPlanner(
            worker_config.backend, worker_config.kernel_version
        )
        self.req = req
        self.store = store
        self.judge_options = judge_options
        self.config = with_hidden_run_dir(worker_config, store)
        self.budget = CrashBudget(req.max_crashes_per_op)  # crashes seen in all tasks
        self.sandbox_level: str | None = None
        self.worker_info: dict[str, Any] = {}
        self.batch_size = int(os.environ.get("OPBENCH_RAY_BATCH", DEFAULT_BATCH))
        self.nodes: set[str] = set()

    def _connect(self) -> Any:
        try:
            import ray
        except ImportError:
            from opbench.run.session import RunError

            raise RunError("--executor ray needs Ray: pip install 'opbench[ray]'") from None
        if not ray.is_initialized():
            os.environ.setdefault("RAY_AUTH_MODE", "disabled")
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
            if self.req.ray_address:
                ray.init(address=self.req.ray_address, **kwargs)
            else:
                ray.init(**kwargs)
        return ray

    def _slots(self, ray: Any) -> int:
        if self.req.workers and self.req.workers > 1:
            return int(self.req.workers)
        res = ray.cluster_resources()
        key = "GPU" if self.req.device.startswith("cuda") else "CPU"
        return max(1, int(res.get(key, 1)))

    def _plan_batch(
        self, batch: list[Case], on_result: Callable[[TestResult], None]
    ) -> tuple[list[Case], list[dict[str, Any]]]:
        """Each case's trial plan; a case whose planning raises is stored as its own
        ``judge_error`` and left out of the batch (:mod:`opbench.run.judge_errors`)."""
        from opbench.judge.evaluate import plan_trials

        kept: list[Case] = []
        plans: list[dict[str, Any]] = []
        for c in batch:
            try:
                plans.append(plan_trials(c, self.req.device, self.judge_options)[0].to_dict())
            except Exception as e:  # opbench's own failure: this test's result
                failed = judge_error_result(
                    c, e, "plan", backend=self.config.backend, device=self.req.device
                )
                self.store.add(failed)
                on_result(failed)
                continue
            kept.append(c)
        return kept, plans

    def run(self, cases: Sequence[Case], on_result: Callable[[TestResult], None]) -> None:
        ray = self._connect()
        cuda = self.req.device.startswith("cuda")
        task = ray.remote(num_gpus=1 if cuda else 0, num_cpus=1, max_retries=0)(run_batch)
        kernel_dir = self.config.backend_path()
        files_ref = ray.put(pack_kernel_dir(kernel_dir)) if kernel_dir else None
        config = asdict(self.config)
        device = self.req.device
        runnable = []
        for c in cases:  # no kernel, or blocked by the static scan: decided here
            done = self.planner.result_without_worker(
                c, self.planner.unit_of(c.op), backend=self.config.backend, device=device
            )
            if done is None:
                runnable.append(c)
            else:
                self.store.add(done)
                on_result(done)
        cases = runnable
        todo = list(batches(cases, max(1, self.batch_size), self.planner.unit_of))
        todo.reverse()
        by_id = {c.test_id: c for c in cases}
        pending: dict[Any, list[Case]] = {}
        slots = self._slots(ray)
        log.info("ray: %d tests in %d tasks, %d at a time", len(cases), len(todo), slots)

        def submit() -> None:
            while todo and len(pending) < slots * 2:
                # the seeds are the harness's choice; the references are recomputed when
                # the results come back (holding them for a whole batch costs memory)
                batch, plans = self._plan_batch(todo.pop(), on_result)
                if not batch:
                    continue
                prior = {op: self.budget.history(op) for op in {c.op for c in batch}}
                units = [self.planner.unit_of(c.op) for c in batch]
                ref = task.remote(
                    config,
                    files_ref,
                    [c.to_dict() for c in batch],
                    float(self.req.test_timeout_s),
                    int(self.req.max_crashes_per_op),
                    prior,
                    [list(u) if u is not None else None for u in units],
                    plans,
                )
                pending[ref] = batch

        submit()
        retried: set[int] = set()
        lost: list[Case] = []
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            ref = ready[0]
            batch = pending.pop(ref)
            try:
                payload = ray.get(ref)
            except Exception as e:  # the task's process or node died: not the kernel's fault
                key = id(batch)
                if key in retried:
                    log.warning(
                        "ray task failed twice (%s); %d tests left for --resume", e, len(batch)
                    )
                    lost.extend(batch)
                else:
                    log.warning("ray task failed (%s); retrying its %d tests", e, len(batch))
                    retried.add(key)
                    todo.append(batch)
                submit()
                continue
            self._absorb(payload, by_id, on_result)
            if payload.get("fatal"):
                for other in pending:
                    ray.cancel(other, force=True)
                from opbench.run.pool import WorkerStartError

                raise WorkerStartError(payload["fatal"])
            submit()
        if lost:
            from opbench.run.session import RunError

            raise RunError(
                f"{len(lost)} tests were lost with failed Ray tasks; "
                "repeat the command with --resume to run them"
            )

    def _absorb(
        self,
        payload: dict[str, Any],
        by_id: dict[str, Case],
        on_result: Callable[[TestResult], None],
    ) -> None:
        if payload.get("sandbox_level"):
            self.sandbox_level = payload["sandbox_level"]
        if payload.get("worker_info"):
            self.planner.note_loaded(payload["worker_info"])
            found = payload["worker_info"].get("backend_settings")
            before = self.worker_info.get("backend_settings")
            self.worker_info = {"load_errors": dict(self.planner.load_errors)}
            if found is not None:  # the first task's start, the latest task's end
                start = before["start"] if before else found["start"]
                self.worker_info["backend_settings"] = {"start": start, "end": found["end"]}
            elif before is not None:
                self.worker_info["backend_settings"] = before
        self.nodes.add(payload.get("node", "?"))
        device = self.req.device
        for item in payload["results"]:
            case = by_id.get(Case.from_dict(item["case"]).test_id) or Case.from_dict(item["case"])
            if "not_run" in item:
                result = not_run_result(
                    case,
                    item["not_run"],
                    self.req.max_crashes_per_op,
                    backend=self.config.backend,
                    device=device,
                )
            else:
                o = item["outcome"]
                outcome = Outcome(
                    o["kind"], o.get("message"), o.get("detail", ""), o.get("stderr_tail", "")
                )
                if outcome.kind in ("crash", "timeout", "oom"):
                    self.budget.record(case.op, outcome.kind)
                worker = f"{payload.get('node', '?')}/{item.get('worker', '')}"
                try:
                    result = judge_outcome(
                        case,
                        outcome,
                        device=device,
                        judge_options=self.judge_options,
                        backend=self.config.backend,
                        worker=worker,
                        unit_info=item.get("unit_info"),
                        scan=self.planner.scan(self.planner.unit_of(case.op)),
                    )
                except Exception as e:  # opbench's own failure: this test's result
                    result = judge_error_result(
                        case, e, "judge", backend=self.config.backend, device=device, worker=worker
                    )
            self.store.add(result)
            on_result(result)
