"""``opbench run`` for program problems: select, check, reference, worker, judge, record.

Runs in the HARNESS, beside :mod:`opbench.run.session` (which hands a run over here
when ``--suite programs[:PATH]`` or ``--problem`` is given:
:func:`opbench.run.setup.is_program_run`), with the same setup (:mod:`opbench.run.setup`)
and the same run directory: ``results.sqlite`` (one test per problem, ``--resume`` keeps
finished ones), ``summary.json`` (``correctness_score``, ``fast_p``, a ``problems`` map
beside ``ops``), ``ops.csv`` and ``report.html`` (:mod:`opbench.run.outputs`).

Per problem, in a worker slot (one thread per worker, as for operators):

1. without a worker: a missing candidate file is ``not_implemented``; a problem that
   cannot load or build here (a missing package, Hugging Face hub files), or whose
   inputs and parameters exceed ``--max-problem-bytes`` (estimated on the ``meta``
   device), is skipped as ``not_runnable`` with the reason; a candidate file whose
   static scan finds tampering fails without running;
2. the harness builds the reference model and computes eager and float64 outputs for
   every trial seed (:mod:`opbench.programs.reference`);
3. a fresh sandboxed worker gets the problem, the candidate and the weights, and sends
   back raw outputs and timings (:mod:`opbench.programs.instrument`), under the test
   timeout; it exits after this one problem;
4. the harness judges (:mod:`opbench.programs.judge`) and stores the result at once.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from opbench.programs import compile_cache, loader, reference
from opbench.programs.judge import judge_program
from opbench.programs.loader import Problem, ProblemError
from opbench.programs.summary import problem_summaries, program_scores
from opbench.report import metrics
from opbench.run.isolation import tampering_result
from opbench.run.outputs import write_outputs
from opbench.run.protocol import MAX_MESSAGE_BYTES
from opbench.run.setup import (
    RunError,
    check_backend_spec,
    check_device,
    devices_for,
    judging_threads,
    open_run_dir,
    worker_config,
)
from opbench.run.store import ResultStore, TestResult
from opbench.spec.judge_options import JudgeOptions
from opbench.suites.case import derive_seed

__all__ = ["SIZES", "run_programs", "select_problems"]

log = logging.getLogger(__name__)

#: ``--size`` choices: our problems' ``SIZES``; KernelBench files have one size.
SIZES = ("small", "full")
#: A compile-cache warm-up that takes longer is given up (the worker compiles cold).
WARM_TIMEOUT_S = 900.0


def compile_jobs() -> int:
    """Problems whose ``torch.compile`` baseline the harness warms at once:
    ``$OPBENCH_COMPILE_JOBS``, else a quarter of the cores (1 to 4). Inductor compiles
    each graph with a pool of its own, so more would only oversubscribe the CPU."""
    env = os.environ.get("OPBENCH_COMPILE_JOBS")
    if env:
        return max(1, int(env))
    return max(1, min(4, (os.cpu_count() or 2) // 4))


def size_for(req: Any) -> str:
    """``--size``, else ``full`` on a GPU and ``small`` on the CPU."""
    size = req.size or ("full" if req.device.startswith("cuda") else "small")
    if size not in SIZES:
        raise ProblemError(f"--size {size!r}: choose {' or '.join(SIZES)}")
    return size


def select_problems(req: Any) -> list[Problem]:
    """The problems a request names: ``--problem`` (one file), or a suite folder."""
    if req.candidate is not None and req.problem is None:
        raise ProblemError("--candidate needs --problem (the file with class Model)")
    if req.problem is not None:
        if req.candidates is not None:
            raise ProblemError("--candidates judges a suite; with --problem use --candidate")
        return [loader.single_problem(Path(req.problem), req.candidate)]
    if req.candidate is not None:
        raise ProblemError("--candidate judges one --problem; for a suite use --candidates DIR")
    _, _, path = req.suite.partition(":")
    root = Path(path) if path else loader.OWN_PROBLEMS
    if not path and not root.is_dir():
        raise ProblemError(f"opbench's own problem set is not installed ({root})")
    problems = loader.discover(
        root, levels=req.levels, candidates=Path(req.candidates) if req.candidates else None
    )
    return loader.only(problems, req.ops) if req.ops else problems


def judged_name(req: Any) -> str:
    """What is judged, for the summary's ``backend`` field."""
    if req.candidate is not None:
        return f"candidate:{Path(req.candidate).resolve()}"
    if req.candidates is not None:
        return f"candidates:{Path(req.candidates).resolve()}"
    return req.backend


def _base(problem: Problem, req: Any, size: str, backend: str, device: str) -> dict[str, Any]:
    """The fields every result of ``problem`` carries (see ``TestResult``)."""
    return dict(
        test_id=problem.problem_id,
        op=problem.problem_id,
        args=f"size={size}",
        seed=req.seed,
        suite=req.suite if req.problem is None else "programs",
        case_json={
            "problem": str(problem.path),
            "candidate": str(problem.candidate) if problem.candidate else None,
            "level": problem.level,
            "size": size,
        },
        backend=backend,
        device=device,
    )


class ProgramExecutor:
    """Worker slots over a queue of problems; every problem gets a fresh worker."""

    def __init__(self, req: Any, store: ResultStore, log_dir: Path, size: str) -> None:
        from opbench.run.executor import with_hidden_run_dir
        from opbench.run.pool import WorkerFactory

        self.req = req
        self.size = size
        self.store = store
        self.backend = judged_name(req)
        config = worker_config(req, JudgeOptions())
        # the backend is imported only in backend mode; candidates come as text
        kernel_dir = req.backend if req.candidate is None and req.candidates is None else "aten"
        config = replace(config, backend=kernel_dir, spare_workers=1, env={})
        # torch.compile baselines: warmed by the harness ahead of the workers, several
        # at once, in a cache the (read-only) workers copy from (opbench.programs.compile_cache)
        self.compile_root = (
            compile_cache.cache_root() if req.compile_baseline and req.perf else None
        )
        if self.compile_root is not None:
            self.compile_root.mkdir(parents=True, exist_ok=True)
            config = replace(config, expose=[str(self.compile_root)])
        self._warming: dict[str, Future] = {}
        self.config = with_hidden_run_dir(config, store, log_dir)
        self.factory = WorkerFactory(self.config, log_dir)
        self.max_bytes = (
            req.max_problem_bytes
            if req.max_problem_bytes is not None
            else loader.default_max_bytes(req.device)
        )
        self.seeds = [derive_seed(req.seed, i + 1) for i in range(max(1, req.n_correctness))]
        self.sandbox_level: str | None = None
        self._error: BaseException | None = None
        self._scans: dict[Path, list[Any]] = {}
        self._lock = threading.Lock()

    # -- the run ---------------------------------------------------------------------
    def run(self, problems: list[Problem], on_result: Callable[[TestResult], None]) -> None:
        todo: queue.Queue[Problem] = queue.Queue()
        for p in problems:
            todo.put(p)
        warm_pool = None
        if self.compile_root is not None:
            warm_pool = ThreadPoolExecutor(compile_jobs(), thread_name_prefix="compile-warm")
            for p in problems:
                if self._fits(p):
                    self._warming[p.problem_id] = warm_pool.submit(
                        compile_cache.warm,
                        p.path,
                        self.size,
                        self.req.device,
                        self.compile_root,
                        WARM_TIMEOUT_S,
                    )
        devices = devices_for(self.req.device, self.req.workers)
        threads = [
            threading.Thread(target=self._slot, args=(d, todo, on_result), daemon=True)
            for d in devices
        ]
        from opbench.run.executor import join_all

        for t in threads:
            t.start()
        try:
            join_all(threads)
        finally:
            self.factory.close()
            if warm_pool is not None:
                warm_pool.shutdown(wait=False, cancel_futures=True)
        if self._error is not None:
            raise self._error

    def _slot(self, device: str, todo: queue.Queue, on_result: Callable[[TestResult], None]):
        from opbench.instrument.tensors import bind_device
        from opbench.run.executor import drain
        from opbench.run.pool import WorkerStartError

        bind_device(device)
        try:
            while True:
                try:
                    problem = todo.get_nowait()
                except queue.Empty:
                    break
                started = time.perf_counter()
                try:
                    result = self.judge(problem, device)
                except WorkerStartError:
                    raise
                except Exception as e:  # opbench's own failure: this problem's result
                    result = self._judge_error(problem, device, e)
                if result.duration_s is None:
                    result.duration_s = time.perf_counter() - started
                self.store.add(result)
                on_result(result)
        except WorkerStartError as e:
            self._error = e
            drain(todo)
        except BaseException as e:  # noqa: BLE001 - surface in the main thread
            self._error = e

    def _judge_error(self, problem: Problem, device: str, error: Exception) -> TestResult:
        """The ``judge_error`` of a problem whose planning or judging raised in the
        harness (:mod:`opbench.run.judge_errors`; the problem's own code failing to load
        or build is ``not_runnable``, decided in :meth:`judge`)."""
        from opbench.run.judge_errors import judge_error_fields

        base = _base(problem, self.req, self.size, self.backend, device)
        return TestResult(**judge_error_fields(error, "plan or judge", problem.problem_id), **base)

    def _fits(self, problem: Problem) -> bool:
        """Whether a problem will reach a worker as far as the harness can tell up front
        (its candidate is there, it loads, it fits the memory cap): only those are
        compiled ahead."""
        if problem.candidate_missing:
            return False
        try:
            nbytes, _, _ = loader.estimate_bytes(loader.load_module(problem.path), self.size)
        except Exception:  # judge() reports it
            return False
        return nbytes <= self.max_bytes

    # -- one problem -----------------------------------------------------------------
    def scan(self, path: Path) -> list[Any]:
        """The static scan of a candidate file (cached; read as text, never run)."""
        from opbench.judge.static_scan import scan_files

        with self._lock:
            if path not in self._scans:
                self._scans[path] = scan_files(
                    [path], allow=frozenset(self.req.allow_rules or []), root=path.parent
                )
            return self._scans[path]

    def judge(self, problem: Problem, device: str) -> TestResult:
        """The result of one problem (never raises for the problem or the candidate)."""
        base = _base(problem, self.req, self.size, self.backend, device)

        def skipped(reason: str) -> TestResult:
            return TestResult(status="skipped", category="not_runnable", message=reason, **base)

        if problem.candidate_missing:
            return TestResult(
                status="not_implemented",
                category="not_implemented",
                message=f"no candidate file {problem.problem_id}.py in --candidates",
                **base,
            )
        try:
            module = loader.load_module(problem.path)
        except BaseException as e:  # noqa: BLE001 - a problem file may raise anything
            if isinstance(e, KeyboardInterrupt):
                raise
            return skipped(loader.not_runnable_reason(problem.path, e))
        lacking = loader.problem_api(module)
        if lacking:
            return skipped(lacking)
        try:
            nbytes, how, out_bytes = loader.estimate_bytes(module, self.size)
        except Exception as e:
            return skipped(loader.not_runnable_reason(problem.path, e))
        if nbytes > self.max_bytes:
            return skipped(
                f"too large: its inputs, parameters and outputs take {nbytes / 2**30:.2f} "
                f"GiB (estimated {'by building it' if how == 'built' else 'on the meta device'}), "
                f"above the {self.max_bytes / 2**30:.2f} GiB cap (--max-problem-bytes)"
            )
        # the worker sends every trial's outputs, and two timed calls' when timed, in one
        # message: one that cannot be sent would read as a crash after minutes of work
        sent = (out_bytes or 0) * (len(self.seeds) + (2 if self.req.perf else 0))
        if sent > MAX_MESSAGE_BYTES:
            return skipped(
                f"too large: its outputs take {out_bytes / 2**30:.2f} GiB, and the "
                f"{len(self.seeds)} trials' outputs{' and two timed calls' if self.req.perf else ''} "
                f"({sent / 2**30:.2f} GiB) exceed the {MAX_MESSAGE_BYTES / 2**30:.0f} GiB a "
                "worker can send; lower --n-correctness"
            )
        findings = self.scan(problem.candidate) if problem.candidate is not None else []
        details: dict[str, Any] = {"size": self.size, "problem_bytes": nbytes}
        if findings:
            details["static_scan"] = [f.to_dict() for f in findings]
        blocked = tampering_result(findings, base, source="candidate", details=details)
        if blocked is not None:
            return blocked
        try:
            built = reference.build(module, self.size, device, self.req.seed)
            expected = [reference.expect(built, module, s, self.size, device) for s in self.seeds]
        except Exception as e:
            return skipped(loader.not_runnable_reason(problem.path, e))
        request = {
            "problem_id": problem.problem_id,
            "problem": {"filename": "problem.py", "source": problem.path.read_text()},
            "candidate": (
                {"filename": "candidate.py", "source": problem.candidate.read_text()}
                if problem.candidate is not None
                else None
            ),
            "backend": self.req.backend,
            "kernel_version": self.req.kernel_version,
            "state_dict": built.state_dict,
            "init_seed": self.req.seed,
            "seeds": self.seeds,
            "size": self.size,
            "perf": self.req.perf,
            "compile_baseline": self.req.compile_baseline,
            "timing_options": {},
        }
        del built
        warming = self._warming.get(problem.problem_id)
        if warming is not None:  # bounded by warm()'s own timeout
            details["compile_cache"] = warming.result()
            if "path" in details["compile_cache"]:
                request["compile_cache"] = details["compile_cache"]["path"]
        worker = self.factory.get(device)
        self.sandbox_level = worker.sandbox_level
        try:
            outcome = worker.run_program(request, self.req.test_timeout_s)
        finally:
            worker.retire()
        result = judge_program(
            {**base, "worker": worker.name},
            outcome,
            expected,
            rtol_scale=self.req.rtol_scale,
            atol_scale=self.req.atol_scale,
            work_device=device if device.startswith("cuda") else None,
            allow_threads="threads" in (self.req.allow_rules or []),
        )
        result.details = {**details, **(result.details or {})}
        _add_work(result, module, self.size)
        return result


def _add_work(result: TestResult, module: Any, size: str) -> None:
    """The problem's own FLOP and byte counts (``flops(size)``, ``bytes_moved(size)``,
    optional) and the rates the candidate reached, when it was timed."""
    from opbench.programs.inputs import call_sized

    work: dict[str, Any] = {}
    for name, key in (("flops", "flops"), ("bytes_moved", "bytes")):
        fn = getattr(module, name, None)
        if callable(fn):
            try:
                work[key] = float(call_sized(fn, size))
            except Exception as e:
                work[f"{key}_error"] = f"{type(e).__name__}: {e}"
    ms = result.cand_device_ms
    if ms and ms > 0:
        if "flops" in work:
            work["cand_tflops"] = work["flops"] / (ms * 1e-3) / 1e12
        if "bytes" in work:
            work["cand_gb_per_s"] = work["bytes"] / (ms * 1e-3) / 1e9
    if work:
        result.details["work"] = work


def run_programs(req: Any, on_progress: Callable[[str, Any], None] | None = None) -> dict:
    """Execute a program run and return its summary (also in ``RUN_DIR/summary.json``)."""
    from opbench.run.machine import environment, gpu_state

    progress = on_progress or (lambda kind, payload: None)
    check_device(req.device)
    try:
        size = size_for(req)
        problems = select_problems(req)
    except ProblemError as e:
        raise RunError(str(e)) from None
    if req.executor != "local":
        raise RunError("program runs use the local executor (--executor ray is for operators)")
    if req.rerun_failed is not None:
        raise RunError("--rerun-failed is for operator runs; a program run continues with --resume")
    if req.candidate is None and req.candidates is None:
        check_backend_spec(req.backend)
    elif req.backend != "aten":
        raise RunError("give either --candidates/--candidate (ModelNew files) or --backend")
    if not problems:
        raise RunError(f"no problem files in {req.suite}")
    out, store, done = open_run_dir(req)
    todo = [p for p in problems if p.problem_id not in done]
    coverage = {
        "problems": len(problems),
        "by_level": dict(Counter(p.level or "-" for p in problems)),
        "size": size,
    }
    progress("phase", f"{len(problems)} program problems, size {size}")
    progress(
        "start", {"total": len(problems), "todo": len(todo), "done": len(problems) - len(todo)}
    )
    t_run = time.perf_counter()
    gpu_start = gpu_state(req.device)
    sandbox_level = None
    if todo:
        executor = ProgramExecutor(req, store, out / "logs", size)
        with judging_threads(req.workers):
            executor.run(todo, lambda r: progress("result", r))
        sandbox_level = executor.sandbox_level
    run_s = time.perf_counter() - t_run
    ids = {p.problem_id for p in problems}
    results = [r for r in store.results() if r.test_id in ids]
    if sandbox_level is not None:
        store.set_meta("sandbox_level", sandbox_level)
    timer = "cuda-events" if req.device.startswith("cuda") else "cpu-wall"
    scores = program_scores(results, compile_baseline=req.compile_baseline and req.perf)
    judge_errors = metrics.judge_error_counts(results)
    summary: dict[str, Any] = {
        "suite": req.suite if req.problem is None else f"programs:{Path(req.problem).resolve()}",
        "backend": judged_name(req),
        "device": req.device,
        "run_dir": str(out),
        "env": environment(req.device),
        "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(req).items()},
        "timer": timer if req.perf else None,
        "baselines": ["eager", *(["torch.compile"] if req.compile_baseline else [])],
        **scores,
        "tests": _test_counts(results),
        "problems": problem_summaries(results),
        "not_tested": dict(scores["not_runnable"]),
        "judge_errors": sum(judge_errors.values()),
        "judge_errors_by_op": judge_errors,
        "coverage": coverage,
        "timing_s": {"run": round(run_s, 3)},
        "resumed": bool(done) and req.resume,
        "sandbox": store.get_meta("sandbox_level") or req.sandbox,
    }
    if gpu_start is not None:
        summary["env"]["gpu_state"] = {"start": gpu_start, "end": gpu_state(req.device)}
    write_outputs(out, summary, results)
    store.close()
    return summary


def _test_counts(results: list[TestResult]) -> dict[str, Any]:
    from opbench.report.metrics import test_counts

    return test_counts(results)
