"""Scoring kernel source strings for reward loops: ``Scorer(...).score(source, op)``.

Each candidate is judged like any run's kernel: its source is scanned, written into a
kernel directory and imported only in a fresh worker process of its own (sandboxed
where bubblewrap works), with the guard, the mutation, aliasing and determinism checks
and, with ``perf``, the timing protocol, by the local executor's own code path
(:class:`~opbench.run.executor.LocalExecutor`).

Built for reward loops, where a batch holds many samples for the same prompt: the
scorer has ``workers`` *lanes*, each a kernel directory of its own and a warm worker
factory (its pre-imported fork server template and a spare, on one device: ``cuda``
lanes go round-robin over the visible GPUs). A candidate takes any free lane, so
candidates run concurrently across lanes, for the same operator too;
:meth:`Scorer.score_many` judges a batch that way. What stays warm across candidates
is everything that does not touch candidate code: the templates and spares, each
operator's test cases, and each test's trial plan and expectations (the harness's
inputs and references, computed once per operator and device; every candidate still
gets its own randomly placed determinism repeat). :meth:`Scorer.stats` reports
candidates/s, latency percentiles and the share of time spent outside the candidates'
own tests.

The workers use the torch thread count this process has when the scorer is made: some
CPU input draws differ in the last bit with the thread count, and the harness's
expectations must be of the worker's very inputs (issue #35).

``score_program(source, problem)`` judges a ``ModelNew`` on a program problem
(KernelBench format) the same way, each candidate in a sandboxed worker of its own.
"""

from __future__ import annotations

import itertools
import os
import queue
import secrets
import shutil
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

__all__ = ["Scorer", "Verdict", "score"]

#: Operators whose trial plans and expectations a scorer keeps (least recently used
#: dropped first): a traces row's references can take tens of MB.
PLAN_CACHE_OPS = 64

#: Failing tests quoted in a verdict.
QUOTED = 5


@dataclass
class Verdict:
    """What the judge said of one candidate for one operator."""

    op: str
    correct: bool
    tests: int
    passed: int
    failures: dict[str, int] = field(default_factory=dict)
    messages: list[str] = field(default_factory=list)  # "[category] inputs: message"
    speedup: float | None = None
    speedup_host: float | None = None
    scan: list[dict[str, Any]] = field(default_factory=list)  # static-scan findings

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _threads(suite: str, lanes: int) -> int:
    """Torch threads of each worker. Inputs must be drawn in the worker exactly as the
    harness draws them for its expectations, and opbench's own draws of large float
    inputs (trace rows) differ in the last bit with the thread count, so workers get
    this process's count. OpInfo samples do not (drawn serially, scaled exactly: all
    2,921 quick-profile float32 cases gave the same digests at 1 and 5 threads): there
    workers get a share of the cores, which on 2 cores saves ~50 ms of each worker's
    start (its intra-op pool)."""
    import torch

    if suite.split(":")[0] == "opinfo":
        from opbench.run.session import cpu_share

        return cpu_share(lanes)
    return torch.get_num_threads()


def _worker_env(suite: str, device: str) -> dict[str, str]:
    """Variables the scorer's workers get on top of this process's environment.

    OpInfo workers preload op_db in their template. On a GPU, each candidate's fresh
    worker makes a CUDA context, and the driver makes them one at a time: an H100 gave
    4.5-4.9 contexts/s however many processes asked at once, 10.5-11.1/s with
    ``CUDA_DEVICE_MAX_CONNECTIONS=1`` (one hardware work queue per context instead of
    8; ``benchmarks/reproduce/cuda_context_rate.py``). That cap was the scorer's. One queue
    serialises work a kernel puts on several streams, for the reference and the
    candidate alike (the timing protocol synchronises the whole device around each
    repetition either way), so a candidate gains nothing from side streams here: set
    the variable in this process's environment to keep CUDA's default."""
    env = {"OPBENCH_PRELOAD": "opinfo"} if suite.startswith("opinfo") else {}
    if device.startswith("cuda") and "CUDA_DEVICE_MAX_CONNECTIONS" not in os.environ:
        env["CUDA_DEVICE_MAX_CONNECTIONS"] = "1"
    return env


def _spares(device: str) -> int:
    """Spare workers a lane keeps starting. Every candidate takes a fresh worker, so a
    lane judges no faster than its spares start: on a GPU a fork makes its own CUDA
    context (~0.3-0.4 s on an H100), longer than a small Triton candidate's tests, and
    with one spare a lane of a 4-lane scorer waited 406 ms per candidate for it
    (``benchmarks/results/scorer-throughput-cuda-opinfo-triton.json``). Two spares
    start in overlap. On the CPU a fork is ready in milliseconds: one is enough, and
    more would take cores from the tests on a small machine."""
    return 2 if device.startswith("cuda") else 1


@dataclass
class _Lane:
    """One kernel directory and the warm worker factory that judges what is written in it."""

    device: str
    kernels: Path
    config: Any
    factory: Any


class _Results:
    """The results of one candidate, kept in memory: the executor's store interface
    (``add``, ``path``) without a SQLite file per candidate (~25 ms each on 2 cores)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.items: list[Any] = []

    def add(self, result: Any) -> None:
        self.items.append(result)


class _Killing:
    """A lane's factory as one candidate's executor sees it: the worker it hands out is
    killed when the executor is done with it instead of being asked to stop (a graceful
    stop waits ~50 ms for a process that only ever judges this candidate)."""

    def __init__(self, factory: Any) -> None:
        self._factory = factory

    def __getattr__(self, name: str) -> Any:
        return getattr(self._factory, name)

    def get(self, device: str, unit: Any = None) -> Any:
        worker = self._factory.get(device, unit)
        worker.stop = worker.retire
        return worker


class Scorer:
    """Judges candidate sources for single operators, keeping workers warm.

    ``suite``: ``opinfo`` (quick profile), ``smoke`` or ``traces[:PATH]``; ``dtypes``
    narrows it (``["f32"]``); ``limit_per_op`` caps the tests per operator; ``perf``
    times correct candidates (meaningful on a GPU); ``workers``: lanes, candidates
    judged at once (for the same operator too); ``threads``: torch threads of each
    worker (default: :func:`_threads`); ``spares``: workers each lane keeps starting
    ahead of need (default: :func:`_spares`).
    """

    def __init__(
        self,
        device: str = "cpu",
        suite: str = "opinfo",
        dtypes: list[str] | None = None,
        perf: bool = False,
        workers: int = 1,
        *,
        limit_per_op: int | None = None,
        traces: str | None = None,
        sandbox: str = "auto",
        test_timeout_s: float = 120.0,
        root: str | Path | None = None,
        threads: int | None = None,
        spares: int | None = None,
    ) -> None:
        from opbench.run.pool import WorkerConfig, WorkerFactory
        from opbench.run.session import RunRequest, check_device, devices_for
        from opbench.spec.judge_options import JudgeOptions

        check_device(device)
        n = max(1, workers)
        devices = devices_for(device, n)  # "cuda" -> cuda:0, cuda:1, ... as opbench run does
        self.device = devices[0]
        self._owns_root = root is None
        self.root = Path(root or tempfile.mkdtemp(prefix="opbench-scorer-")).resolve()
        self.kernels = self.root / "kernels"
        self.runs = self.root / "runs"
        self.kernels.mkdir(parents=True, exist_ok=True)
        self.runs.mkdir(parents=True, exist_ok=True)
        self._request = RunRequest(
            suite=suite, backend=str(self.kernels), device=device, dtypes=dtypes,
            limit_per_op=limit_per_op, perf=perf, traces=traces, sandbox=sandbox,
            test_timeout_s=test_timeout_s, workers=n,
        )  # fmt: skip
        self.judge_options = JudgeOptions()
        self.config = WorkerConfig(
            backend=str(self.kernels), device=device, perf=perf,
            judge_options=asdict(self.judge_options), sandbox=sandbox,
            hide=[str(self.runs)], threads=threads or _threads(suite, n),
            spare_workers=spares or _spares(device),
            env=_worker_env(suite, device),
        )  # fmt: skip
        self.lanes: list[_Lane] = []
        for i, dev in enumerate(devices):
            kernels = self.kernels / f"lane{i}"
            kernels.mkdir()
            config = replace(self.config, backend=str(kernels), device=dev)
            factory = WorkerFactory(config, self.runs / "logs" / f"lane{i}")
            self.lanes.append(_Lane(dev, kernels, config, factory))
        self._free: queue.Queue[_Lane] = queue.Queue()
        for lane in self.lanes:
            self._free.put(lane)
        self._pool: ThreadPoolExecutor | None = None
        self._cases: dict[str, list[Any]] = {}
        self._plans: OrderedDict[tuple[str, str], dict[str, Any]] = OrderedDict()
        self._plan_locks: dict[tuple[str, str], threading.Lock] = {}
        self._lock = threading.Lock()
        self._counter = itertools.count(1)
        self.scored = 0
        self._latencies: list[float] = []
        self._tests_s = 0.0
        self._busy_s = 0.0
        self._active = 0
        self._busy_since = 0.0

    # ------------------------------------------------------------------ public
    def score(self, source: str, op: str) -> Verdict:
        """Judge ``source`` (a kernel file defining ``<folder>_kernel_impl``) for the
        overload ``op`` (``relu.default``), in the first free lane."""
        from opbench.spec.ops import canonical_name

        op = canonical_name(op)
        cases = self._cases_for(op)
        self._busy(+1)
        try:
            lane = self._free.get()
            try:
                t0 = time.perf_counter()
                verdict, tests_s = self._judge(lane, op, cases, source)
                latency = time.perf_counter() - t0
            finally:
                self._free.put(lane)
        finally:
            self._busy(-1)
        with self._lock:
            self.scored += 1
            self._latencies.append(latency)
            self._tests_s += tests_s
        return verdict

    def score_many(self, sources_and_ops: Iterable[tuple[str, str]]) -> list[Verdict]:
        """Judge a batch of ``(source, op)`` pairs across the lanes at once (samples for
        the same operator too); the verdicts in the batch's order."""
        items = list(sources_and_ops)
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(len(self.lanes), "opbench-score")
            pool = self._pool
        return list(pool.map(lambda item: self.score(*item), items))

    def warm(self) -> float:
        """Start every lane's template and spare now (else the first candidate in each
        lane waits for them); returns the seconds it took."""
        t0 = time.perf_counter()

        def start(lane: _Lane) -> None:
            lane.factory.get(lane.device).kill()  # leaves the template and a spare warm

        with ThreadPoolExecutor(len(self.lanes)) as pool:
            list(pool.map(start, self.lanes))
        return time.perf_counter() - t0

    def stats(self) -> dict[str, Any]:
        """Throughput since the scorer was made (or :meth:`reset_stats`): candidates,
        candidates/s over ``busy_s`` (the time at least one was being judged), the
        latency of one candidate in a lane (p50, p99: its tests, its worker's start and
        import, the harness's planning and judging; waiting for a free lane excluded),
        ``lane_s`` (those latencies summed: above ``busy_s`` when lanes overlapped) and
        the share of lane time spent outside the candidates' own tests (``tests_s``: the
        workers' time in each test, as they report it)."""
        with self._lock:
            lat = sorted(self._latencies)
            busy = self._busy_s + (time.perf_counter() - self._busy_since if self._active else 0.0)
            tests_s = self._tests_s
        n = len(lat)

        def pct(q: float) -> float | None:
            return round(lat[min(n - 1, int(q * n))], 4) if n else None

        lane_s = sum(lat)
        return {
            "candidates": n,
            "lanes": len(self.lanes),
            "busy_s": round(busy, 3),
            "candidates_per_s": round(n / busy, 2) if busy > 0 else None,
            "latency_p50_s": pct(0.50),
            "latency_p99_s": pct(0.99),
            "lane_s": round(lane_s, 3),
            "tests_s": round(tests_s, 3),
            "outside_tests_share": round(1 - tests_s / lane_s, 3) if lane_s > 0 else None,
        }

    def reset_stats(self) -> None:
        """Start :meth:`stats` afresh (after a warm-up, say)."""
        with self._lock:
            self._latencies = []
            self._tests_s = 0.0
            self._busy_s = 0.0
            self._busy_since = time.perf_counter()

    def score_program(
        self,
        source: str,
        problem: str | Path,
        *,
        size: str | None = None,
        n_correctness: int = 5,
        compile_baseline: bool = False,
    ) -> Verdict:
        """Judge ``source`` (a file defining ``class ModelNew``) on the program problem
        file ``problem`` (KernelBench format), as ``opbench run --problem --candidate``
        does: a sandboxed worker of its own, the harness's references over
        ``n_correctness`` seeds, and with ``perf`` eager (and ``compile_baseline``:
        ``torch.compile``) timed live. ``Verdict.op`` is the problem's id."""
        from opbench.run.session import run

        problem = Path(problem).resolve()
        n = next(self._counter)
        cand = self.root / "programs" / f"candidate_{n}.py"
        cand.parent.mkdir(parents=True, exist_ok=True)
        cand.write_text(source)
        lane = self._free.get()  # one program per lane at a time
        try:
            req = replace(
                self._request, suite="programs", backend="aten", problem=problem,
                candidate=cand, size=size, n_correctness=n_correctness,
                compile_baseline=compile_baseline, out=self.runs / f"program_{n}", workers=1,
                device=lane.device,
            )  # fmt: skip
            summary = run(req)
        finally:
            self._free.put(lane)
        with self._lock:
            self.scored += 1
        problem_id, rec = next(iter((summary.get("problems") or {}).items()), (problem.stem, {}))
        scan = [
            f
            for findings in ((summary.get("static_scan") or {}).get("files") or {}).values()
            for f in findings
        ]
        if not rec:  # not runnable here: no verdict
            why = next(iter((summary.get("not_runnable") or {}).values()), "no verdict")
            return Verdict(problem_id, False, 0, 0, {"not_runnable": 1}, [str(why)], scan=scan)
        correct = bool(rec.get("correct")) and problem_id not in (summary.get("weak") or {})
        category = rec.get("category") or ("weak" if rec.get("correct") else rec.get("status"))
        return Verdict(
            op=problem_id,
            correct=correct,
            tests=1,
            passed=int(rec.get("status") == "passed"),
            failures={} if correct else {category: 1},
            messages=[] if correct else [f"[{category}] {rec.get('message') or ''}"],
            speedup=rec.get("speedup") if correct else None,
            speedup_host=rec.get("speedup_host") if correct else None,
            scan=scan,
        )

    def close(self) -> None:
        """Stop the workers (and delete the scorer's folder if it made it)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        for lane in self.lanes:
            lane.factory.close()
        if self._owns_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Scorer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ inside
    def _busy(self, delta: int) -> None:
        """Count candidates being judged; the clock of :meth:`stats` runs while any is."""
        with self._lock:
            now = time.perf_counter()
            if delta > 0 and self._active == 0:
                self._busy_since = now
            self._active += delta
            if delta < 0 and self._active == 0:
                self._busy_s += now - self._busy_since

    def _cases_for(self, op: str) -> list[Any]:
        with self._lock:
            if op in self._cases:
                return self._cases[op]
            op_lock = self._plan_locks.setdefault(("cases", op), threading.Lock())
        with op_lock:  # a batch of samples for a new op builds its cases once
            with self._lock:
                if op in self._cases:
                    return self._cases[op]
            from opbench.run.session import load_suite_cases, select_cases

            req = replace(self._request, ops=[op])
            cases = select_cases(req, load_suite_cases(req)).cases
            if not cases:
                raise ValueError(f"the {req.suite} suite has no test for {op}")
            with self._lock:
                self._cases[op] = cases
        return cases

    def _plan(self, case: Any, device: str) -> tuple[Any, Any]:
        """A test's trial plan and expectations, computed once per operator and device
        (:func:`~opbench.judge.expectations.plan_trials`); each candidate gets a copy of
        the plan with its own randomly placed determinism repeat."""
        from opbench.judge.expectations import plan_trials

        key = (case.op, device)
        with self._lock:
            lock = self._plan_locks.setdefault(("plan", *key), threading.Lock())
        with lock:
            with self._lock:
                found = self._plans.get(key, {}).get(case.test_id)
                if key in self._plans:
                    self._plans.move_to_end(key)
            if found is None:
                found = plan_trials(case, device, self.judge_options)
                with self._lock:
                    self._plans.setdefault(key, {})[case.test_id] = found
                    self._plans.move_to_end(key)
                    while len(self._plans) > PLAN_CACHE_OPS:
                        self._plans.popitem(last=False)
        plan, expectations = found
        drawn = sum(1 for r in plan.redraw if not r) or len(plan.seeds)
        mine = replace(
            plan,
            seeds=list(plan.seeds),
            redraw=list(plan.redraw),
            redraw_seeds_tried=list(plan.redraw_seeds_tried),
            repeat_after=secrets.randbelow(max(1, drawn)),  # the worker cannot know it
        )
        return mine, expectations

    def _judge(self, lane: _Lane, op: str, cases: list[Any], source: str) -> tuple[Verdict, float]:
        """Write ``source`` into the lane's (emptied) directory and judge it; the verdict
        and the seconds its worker spent in its tests."""
        from opbench.report.metrics import op_summaries
        from opbench.run.executor import ExecutionOptions, LocalExecutor
        from opbench.run.isolation import IsolationPlanner
        from opbench.spec.ops import folder_name

        for old in lane.kernels.iterdir():  # nothing of the lane's previous candidate
            shutil.rmtree(old) if old.is_dir() else old.unlink()
        folder = folder_name(op)
        (lane.kernels / folder).mkdir()
        (lane.kernels / folder / f"{folder}_implementation.py").write_text(source)
        planner = IsolationPlanner(str(lane.kernels))
        findings = [f.to_dict() for f in planner.scan(planner.unit_of(op))]
        store = _Results(self.runs / "results.sqlite")
        executor = LocalExecutor(
            lane.config,
            ExecutionOptions(
                workers=1, devices=[lane.device], test_timeout_s=self._request.test_timeout_s
            ),
            store,  # type: ignore[arg-type]
            self.runs / "logs",
            self.judge_options,
            planner,
            factory=_Killing(lane.factory),  # type: ignore[arg-type]
            plans=self._plan,
        )
        executor.run(cases, lambda r: None)
        results = store.items
        tests_s = sum(r.duration_s or 0.0 for r in results)
        summary = op_summaries(results).get(op) or {}
        # a judge_error is opbench's fault: nothing for the kernel's author to fix
        failing = [r for r in results if r.status not in ("passed", "skipped", "judge_error")]
        if not failing and not summary.get("tests"):
            failing = results  # nothing was judged: say why (every test skipped, and how)
        verdict = Verdict(
            op=op,
            correct=bool(summary.get("correct")),
            tests=int(summary.get("tests", 0)),
            passed=int(summary.get("passed", 0)),
            failures=dict(summary.get("failures") or {}),
            messages=[
                f"[{r.category or r.status}] {r.args[:300]}: {' '.join((r.message or '').split())[:400]}"
                for r in failing[:QUOTED]
            ],
            speedup=summary.get("speedup"),
            speedup_host=summary.get("speedup_host"),
            scan=findings,
        )
        return verdict, tests_s


def score(source: str, op: str, **scorer_args: Any) -> Verdict:
    """One-shot :meth:`Scorer.score` (starts and stops a scorer: use a :class:`Scorer`
    for many candidates)."""
    with Scorer(**scorer_args) as s:
        return s.score(source, op)
