"""Scoring kernel source strings for reward loops: ``Scorer(...).score(source, op)``.

Each candidate is judged like any run's kernel: its source is scanned, written into the
scorer's own kernel directory and imported only in a fresh worker process of its own
(sandboxed where bubblewrap works), with the guard, the mutation, aliasing and
determinism checks and, with ``perf``, the timing protocol. What the scorer keeps warm
across calls is everything that does not touch candidate code: the worker factory's
pre-imported template (a worker costs a fork, not an import of torch), its spare
workers, and each operator's test cases.

Thread-safe: calls for different operators run at once (up to ``workers``); calls for
the same operator take turns (they share the operator's folder).

``score_program(source, problem)`` judges a ``ModelNew`` on a program problem
(KernelBench format) the same way, each candidate in a sandboxed worker of its own.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
import threading
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

__all__ = ["Scorer", "Verdict", "score"]

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


class Scorer:
    """Judges candidate sources for single operators, keeping workers warm.

    ``suite``: ``opinfo`` (quick profile), ``smoke`` or ``traces[:PATH]``; ``dtypes``
    narrows it (``["f32"]``); ``limit_per_op`` caps the tests per operator; ``perf``
    times correct candidates (meaningful on a GPU); ``workers``: operators judged at once.
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
    ) -> None:
        from opbench.judge.evaluate import JudgeOptions
        from opbench.run.pool import WorkerConfig, WorkerFactory
        from opbench.run.session import RunRequest, check_device, cpu_share, devices_for

        check_device(device)
        self.device = devices_for(device, 1)[0]  # "cuda" -> "cuda:0", as opbench run does
        self._owns_root = root is None
        self.root = Path(root or tempfile.mkdtemp(prefix="opbench-scorer-")).resolve()
        self.kernels = self.root / "kernels"
        self.runs = self.root / "runs"
        self.kernels.mkdir(parents=True, exist_ok=True)
        self.runs.mkdir(parents=True, exist_ok=True)
        self._request = RunRequest(
            suite=suite, backend=str(self.kernels), device=device, dtypes=dtypes,
            limit_per_op=limit_per_op, perf=perf, traces=traces, sandbox=sandbox,
            test_timeout_s=test_timeout_s, workers=workers,
        )  # fmt: skip
        self.judge_options = JudgeOptions()
        self.config = WorkerConfig(
            backend=str(self.kernels), device=device, perf=perf,
            judge_options=asdict(self.judge_options), sandbox=sandbox,
            hide=[str(self.runs)], threads=cpu_share(workers),
            spare_workers=max(1, workers),
            env={"OPBENCH_PRELOAD": "opinfo"} if suite.startswith("opinfo") else {},
        )  # fmt: skip
        self.factory = WorkerFactory(self.config, self.runs / "logs")
        self._slots = threading.BoundedSemaphore(max(1, workers))
        self._op_locks: dict[str, threading.Lock] = {}
        self._cases: dict[str, list[Any]] = {}
        self._lock = threading.Lock()
        self._counter = itertools.count(1)
        self.scored = 0

    # ------------------------------------------------------------------ public
    def score(self, source: str, op: str) -> Verdict:
        """Judge ``source`` (a kernel file defining ``<folder>_kernel_impl``) for the
        overload ``op`` (``relu.default``)."""
        from opbench.spec.ops import canonical_name, folder_name

        op = canonical_name(op)
        with self._lock:
            op_lock = self._op_locks.setdefault(op, threading.Lock())
        with op_lock, self._slots:
            cases = self._cases_for(op)
            folder = folder_name(op)
            d = self.kernels / folder
            d.mkdir(parents=True, exist_ok=True)
            (d / f"{folder}_implementation.py").write_text(source)
            verdict = self._judge(op, cases)
        with self._lock:  # calls for different ops finish at once
            self.scored += 1
        return verdict

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
        req = replace(
            self._request, suite="programs", backend="aten", problem=problem, candidate=cand,
            size=size, n_correctness=n_correctness, compile_baseline=compile_baseline,
            out=self.runs / f"program_{n}", workers=1,
        )  # fmt: skip
        with self._slots:
            summary = run(req)
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
        self.factory.close()
        if self._owns_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Scorer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ inside
    def _cases_for(self, op: str) -> list[Any]:
        with self._lock:
            if op in self._cases:
                return self._cases[op]
        from dataclasses import replace

        from opbench.run.session import load_suite_cases, select_cases

        req = replace(self._request, ops=[op])
        cases = select_cases(req, load_suite_cases(req)).cases
        if not cases:
            raise ValueError(f"the {req.suite} suite has no test for {op}")
        with self._lock:
            self._cases[op] = cases
        return cases

    def _judge(self, op: str, cases: list[Any]) -> Verdict:
        from opbench.report.metrics import op_summaries
        from opbench.run.executor import ExecutionOptions, LocalExecutor
        from opbench.run.isolation import IsolationPlanner
        from opbench.run.store import ResultStore

        run_dir = self.runs / f"score-{next(self._counter)}"
        run_dir.mkdir(parents=True)
        store = ResultStore(run_dir / "results.sqlite")
        try:
            planner = IsolationPlanner(str(self.kernels))
            unit = planner.unit_of(op)
            findings = [f.to_dict() for f in planner.scan(unit)]
            executor = LocalExecutor(
                self.config,
                ExecutionOptions(
                    workers=1,
                    devices=[self.device],
                    test_timeout_s=self._request.test_timeout_s,
                ),
                store,
                run_dir / "logs",
                self.judge_options,
                planner,
                factory=self.factory,
            )
            executor.run(cases, lambda r: None)
            results = list(store.results())
        finally:
            store.close()
            shutil.rmtree(run_dir, ignore_errors=True)
        summary = op_summaries(results).get(op) or {}
        # a judge_error is opbench's fault: nothing for the kernel's author to fix
        failing = [r for r in results if r.status not in ("passed", "skipped", "judge_error")]
        if not failing and not summary.get("tests"):
            failing = results  # nothing was judged: say why (every test skipped, and how)
        return Verdict(
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


def score(source: str, op: str, **scorer_args: Any) -> Verdict:
    """One-shot :meth:`Scorer.score` (starts and stops a scorer: use a :class:`Scorer`
    for many candidates)."""
    with Scorer(**scorer_args) as s:
        return s.score(source, op)
