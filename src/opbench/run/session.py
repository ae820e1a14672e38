"""One ``opbench run``: build the suite, select cases, execute, record, summarise.

The CLI is a thin layer over :func:`run`; everything a script needs (the request,
the summary dict) is plain data.
"""

from __future__ import annotations

import csv
import json
import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from opbench.report import metrics
from opbench.run.machine import environment, gpu_state
from opbench.run.store import ResultStore, StoreError, TestResult
from opbench.spec.args import DTYPE_BY_NAME, iter_tensor_specs, parse_args
from opbench.spec.ops import select_ops
from opbench.suites.case import Case

log = logging.getLogger(__name__)

SUITES = ("smoke", "opinfo", "traces", "torchbench", "programs")


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
    workers: int = 1
    executor: str = "local"
    ray_address: str | None = None
    resume: bool = False
    seed: int = 0
    traces: str | None = None
    test_timeout_s: float = 120.0
    max_crashes_per_op: int = 3
    sandbox: str = "off"
    kernel_version: str | None = None
    rtol_scale: float = 1.0
    atol_scale: float = 1.0
    allow_pytorch: bool = False
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
        if self.problem is not None or self.suite.partition(":")[0] == "programs":
            out.update(
                {k: (str(d[k]) if isinstance(d[k], Path) else d[k]) for k in self.PROGRAM_IDENTITY}
            )
        return out


@dataclass
class SuiteSelection:
    cases: list[Case]
    asked_ops: set[str]
    not_tested: dict[str, str] = field(default_factory=dict)
    excluded: list[Case] = field(default_factory=list)
    coverage: dict[str, Any] = field(default_factory=dict)


def parse_dtypes(text: Iterable[str] | None) -> list[str] | None:
    if not text:
        return None
    names = [t.strip() for item in text for t in item.split(",") if t.strip()]
    bad = [n for n in names if n not in DTYPE_BY_NAME]
    if bad:
        raise RunError(
            f"unknown dtype(s) {', '.join(bad)}; use the trace names: {', '.join(DTYPE_BY_NAME)}"
        )
    return names


def load_suite_cases(req: RunRequest, progress: Callable[[str], None] | None = None) -> list[Case]:
    """All cases of the requested suite (included and excluded); ``progress`` hears how
    far a long build (the OpInfo mapping) is."""
    name, _, path = req.suite.partition(":")
    if name == "smoke":
        from opbench.suites.smoke import build_smoke_cases

        return build_smoke_cases(seed=req.seed)
    if name in ("traces", "torchbench"):
        from opbench.suites.sources import resolve_traces
        from opbench.suites.traces import build_trace_cases

        source = resolve_traces(path or req.traces)
        return build_trace_cases(source, suite=name, seed=req.seed, device=req.device)
    if name == "opinfo":
        from opbench.suites.opinfo import build_opinfo_cases

        dtypes = [DTYPE_BY_NAME[d] for d in req.dtypes] if req.dtypes else None
        try:
            hint = {o.removeprefix("aten.") for o in req.ops} if req.ops else None
            return build_opinfo_cases(
                device=req.device,
                profile=req.profile,
                dtypes=dtypes,
                hint_ops=hint,
                progress=progress,
            )
        except ImportError as e:
            raise RunError(f"the opinfo suite needs `pip install expecttest` ({e})") from None
    raise RunError(f"unknown suite {req.suite!r}; choose one of {', '.join(SUITES)} (traces:PATH)")


def _has_zero_size(case: Case) -> bool:
    """Whether any tensor of a trace case has no elements (False when unparsable)."""
    if case.source == "opinfo":
        return False
    try:
        return any(t.numel == 0 for t in iter_tensor_specs(parse_args(case.args)))
    except Exception:  # an unparsable case keeps its place; the run reports it
        return False


def _case_dtypes(case: Case) -> set[str]:
    from opbench.spec.args import NAME_BY_DTYPE

    if case.source == "opinfo":  # "float32" -> the trace name "f32"
        import torch

        d = case.params.get("dtype")
        dt = getattr(torch, d, None) if d else None
        return {NAME_BY_DTYPE.get(dt, d)} if d else set()
    try:
        parsed = parse_args(case.args)
    except Exception:
        return set()

    return {NAME_BY_DTYPE.get(t.dtype, str(t.dtype)) for t in iter_tensor_specs(parsed)}


def _variant(case: Case, kinds: dict[str, str]) -> str:
    """The OpInfo variant a case was made from, else its overload's kind from the schema
    (``kinds`` caches that per overload)."""
    if case.source == "opinfo":
        return str(case.params.get("variant", "functional"))
    if case.op not in kinds:
        from opbench.spec.variants import kind_of

        try:
            kinds[case.op] = kind_of(case.op)
        except (AttributeError, RuntimeError, ValueError):  # not an op of this torch
            kinds[case.op] = "other"
    return kinds[case.op]


def coverage_of(cases: Iterable[Case]) -> dict[str, Any]:
    """What a selection covers, for the run's header and summary: tests, overloads,
    operators (base names, in-place and out= folded in), and tests per dtype and per
    variant (functional, inplace, out; ``other`` for ops that mutate otherwise)."""
    from opbench.spec.ops import base_name

    cases = list(cases)
    by_dtype: Counter[str] = Counter()
    by_variant: Counter[str] = Counter()
    kinds: dict[str, str] = {}
    for c in cases:
        for d in _case_dtypes(c) or {"none"}:
            by_dtype[d] += 1
        by_variant[_variant(c, kinds)] += 1
    cov: dict[str, Any] = {
        "tests": len(cases),
        "overloads": len({c.op for c in cases}),
        "operators": len({base_name(c.op).rstrip("_") or base_name(c.op) for c in cases}),
        "by_dtype": dict(by_dtype.most_common()),
        "by_variant": dict(by_variant.most_common()),
    }
    opinfos = {(c.params.get("opinfo"), c.params.get("variant_test_name")) for c in cases}
    opinfos.discard((None, None))
    if opinfos:
        cov["opinfos"] = len(opinfos)
    return cov


def select_cases(req: RunRequest, all_cases: list[Case]) -> SuiteSelection:
    """Apply ``--ops``, ``--dtypes`` and ``--limit-per-op``; find the not-tested ops."""
    suite_ops = {c.op for c in all_cases}
    if req.ops:
        asked, not_tested = select_ops(req.ops, suite_ops)
    else:
        asked, not_tested = set(suite_ops), {}
    chosen: list[Case] = []
    excluded: list[Case] = []
    per_op: Counter[str] = Counter()
    reasons: dict[str, Counter[str]] = {}
    dtypes = set(req.dtypes) if req.dtypes else None
    if req.limit_per_op is not None:
        # The first N of an op should be informative: zero-size cases (whose right answer
        # is trivial, so they are weak tests) go after every other case of the op.
        all_cases = sorted(all_cases, key=_has_zero_size)
    for c in all_cases:
        if c.op not in asked:
            continue
        if not c.included:
            excluded.append(c)
            reasons.setdefault(c.op, Counter())[c.why_excluded or "excluded"] += 1
            continue
        if dtypes is not None and c.source != "opinfo":
            cd = _case_dtypes(c)
            if cd and not (cd & dtypes):
                reasons.setdefault(c.op, Counter())["no case with the asked dtypes"] += 1
                continue
        if req.limit_per_op is not None and per_op[c.op] >= req.limit_per_op:
            continue
        per_op[c.op] += 1
        chosen.append(c)
    for op in sorted(asked):
        if per_op[op] == 0:
            why = reasons.get(op)
            not_tested[op] = (
                f"no included test ({why.most_common(1)[0][0]})" if why else "no included test"
            )
    return SuiteSelection(chosen, asked, not_tested, excluded, coverage_of(chosen))


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


def run(req: RunRequest, on_progress: Callable[[str, Any], None] | None = None) -> dict[str, Any]:
    """Execute a run and return its summary (also written to ``RUN_DIR/summary.json``)."""
    from opbench.judge.evaluate import JudgeOptions
    from opbench.programs.runner import is_program_run

    if is_program_run(req):  # whole programs (KernelBench format): their own runner
        from opbench.programs.runner import run_programs

        return run_programs(req, on_progress)
    progress = on_progress or (lambda kind, payload: None)
    check_device(req.device)
    check_backend_spec(req.backend)
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

    t_build = time.perf_counter()
    progress("phase", "building the suite")
    selection = select_cases(req, load_suite_cases(req, lambda line: progress("phase", line)))
    cases = selection.cases
    if req.rerun_failed is not None:
        failed = _failed_ids(Path(req.rerun_failed))
        cases = [c for c in cases if c.test_id in failed]
        store.remove({c.test_id for c in cases})
        done = store.finished_ids()
    build_s = time.perf_counter() - t_build
    progress("coverage", selection.coverage)
    todo = [c for c in cases if c.test_id not in done]
    progress("start", {"total": len(cases), "todo": len(todo), "done": len(cases) - len(todo)})

    judge_options = JudgeOptions(
        rtol_scale=req.rtol_scale,
        atol_scale=req.atol_scale,
        allow_pytorch=req.allow_pytorch,
        allow_threads="threads" in (req.allow_rules or []),
    )
    worker_config = _worker_config(req, judge_options)
    from opbench.run.isolation import IsolationPlanner

    planner = IsolationPlanner(
        worker_config.backend, req.kernel_version, frozenset(req.allow_rules or [])
    )
    for unit in {planner.unit_of(c.op) for c in cases}:
        planner.scan(unit)  # every kernel the run selects, before any is imported
    t_run = time.perf_counter()
    gpu_start = gpu_state(req.device)
    sandbox_level = None
    worker_info: dict[str, Any] = {}
    if todo:
        if req.executor == "ray":
            from opbench.run.ray_executor import RayExecutor

            executor = RayExecutor(worker_config, req, store, judge_options, planner)
        elif req.executor == "local":
            from opbench.run.executor import ExecutionOptions, LocalExecutor

            executor = LocalExecutor(
                worker_config,
                ExecutionOptions(
                    workers=req.workers,
                    devices=devices_for(req.device, req.workers),
                    test_timeout_s=req.test_timeout_s,
                    max_crashes_per_op=req.max_crashes_per_op,
                ),
                store,
                out / "logs",
                judge_options,
                planner,
            )
        else:
            raise RunError(f"unknown --executor {req.executor!r}; choose local or ray")
        import torch

        # The judging process gets its share of the cores too, for this run only.
        threads_before = torch.get_num_threads()
        if req.executor == "local":
            torch.set_num_threads(cpu_share(req.workers))
        try:
            executor.run(todo, lambda r: progress("result", r))
        finally:
            torch.set_num_threads(threads_before)
        sandbox_level = executor.sandbox_level
        worker_info = executor.worker_info
    run_s = time.perf_counter() - t_run

    selected_ids = {c.test_id for c in cases}
    results = [r for r in store.results() if r.test_id in selected_ids]
    summary = summarize(req, selection, results, out)
    summary["coverage"] = selection.coverage
    summary["timing_s"] = {"build_suite": round(build_s, 3), "run": round(run_s, 3)}
    summary["resumed"] = bool(done) and req.resume
    unfinished = unfinished_summary(cases, results, worker_info.get("unfinished") or [])
    if unfinished:
        summary["unfinished"] = unfinished
    if sandbox_level is not None:
        store.set_meta("sandbox_level", sandbox_level)
    summary["sandbox"] = store.get_meta("sandbox_level") or req.sandbox
    settings = worker_info.get("backend_settings")
    earlier = store.get_meta("backend_settings")  # a resumed run's first part
    if settings and earlier:
        settings = {"start": earlier["start"], "end": settings["end"]}
    settings = settings or earlier
    if settings:
        summary["env"]["backend_settings"] = settings
        store.set_meta("backend_settings", settings)
    if gpu_start is not None:
        summary["env"]["gpu_state"] = {"start": gpu_start, "end": gpu_state(req.device)}
    load_errors = {**planner.load_errors, **(worker_info.get("load_errors") or {})}
    if load_errors:
        summary["backend_load_errors"] = dict(sorted(load_errors.items()))
    if planner.layout is not None:
        summary["static_scan"] = {
            "root": str(planner.layout.path),
            "allowed_rules": sorted(req.allow_rules or []),
            "files": planner.scan_report(),
        }
    write_outputs(out, summary, results)
    store.close()
    return summary


def unfinished_summary(
    cases: list[Case], results: list[TestResult], errors: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """Selected tests with no recorded result, after a harness error the run went on
    past (:meth:`opbench.run.executor.LocalExecutor._slot`): how many, of which
    operators, and why. None when every selected test has a result. Their operators
    stay in the score's denominator; ``--resume`` runs exactly these tests."""
    recorded = {r.test_id for r in results}
    missing = [c for c in cases if c.test_id not in recorded]
    if not missing:
        return None
    return {
        "tests": len(missing),
        "ops": sorted({f"aten.{c.op}" for c in missing}),
        "errors": errors,
        "how_to_finish": "run the same command again with --resume",
    }


def _worker_config(req: RunRequest, judge_options: Any):
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


def cpu_share(workers: int) -> int:
    """Intra-op threads for each of ``workers`` workers and the judging process."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, cores // (max(workers, 1) + 1))


def _failed_ids(run_dir: Path) -> set[str]:
    path = run_dir / "results.sqlite"
    if not path.exists():
        raise RunError(f"--rerun-failed: {path} does not exist")
    store = ResultStore(path)
    try:
        return {r.test_id for r in store.results() if r.status not in ("passed", "skipped")}
    finally:
        store.close()


def summarize(
    req: RunRequest, selection: SuiteSelection, results: list[TestResult], out: Path
) -> dict[str, Any]:
    """The ``summary.json`` contract (DESIGN.md)."""
    ops = metrics.op_summaries(results, overhead_dominated=req.overhead_dominated)
    not_tested = dict(selection.not_tested)
    skipped_why = {r.op: r.message for r in results if r.status == "skipped" and r.message}
    judge_errors = metrics.judge_error_counts(results)
    for op, v in ops.items():
        # Weak, skipped and judge_error tests are left out of the verdict; an op left with
        # no other test has no verdict at all (the same for every backend).
        if not v.get("tests") and v.get("judge_errors"):
            not_tested[op] = (
                f"every test a judge_error ({v['judge_errors']}): the harness could not plan "
                "or judge it (an opbench fault, not the backend's)"
            )
        elif not v.get("tests") and v.get("skipped"):
            not_tested[op] = f"every test skipped ({skipped_why.get(op, 'no verdict')})"
        elif v.get("tests") and v.get("note", "").startswith("only weak tests"):
            not_tested[op] = (
                f"only weak tests ({v['tests']}): a trivial answer (zeros, a constant or "
                "a copy of an input) would pass every selected input, so no verdict"
            )
    denominator = {op for op in selection.asked_ops if op not in not_tested}
    for op in denominator:
        ops.setdefault(
            op,
            {
                "tests": 0,
                "passed": 0,
                "correct": False,
                "failures": {},
                "speedup": None,
                "speedup_host": None,
            },
        )
    score = metrics.scores(ops, denominator)
    timer = "cuda-events" if req.device.startswith("cuda") else "cpu-wall"
    summary: dict[str, Any] = {
        "suite": req.suite,
        "backend": req.backend,
        "device": req.device,
        "run_dir": str(out),
        "env": environment(req.device),
        "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(req).items()},
        "timer": timer if req.perf else None,
        **score,
        "tests": metrics.test_counts(results),
        "ops": {f"aten.{op}": v for op, v in sorted(ops.items()) if op in denominator},
        "not_tested": {f"aten.{op}": why for op, why in sorted(not_tested.items())},
        "judge_errors": sum(judge_errors.values()),
        "judge_errors_by_op": {f"aten.{op}": n for op, n in judge_errors.items()},
    }
    return summary


def write_outputs(out: Path, summary: dict[str, Any], results: list[TestResult]) -> None:
    """summary.json (atomically), ops.csv and report.html."""
    from opbench.report.html import render

    tmp = out / "summary.json.tmp"
    tmp.write_text(json.dumps(summary, indent=2, default=str))
    tmp.replace(out / "summary.json")
    (out / "report.html").write_text(render(summary, results))
    from opbench.report.export import write_tests_parquet

    if not write_tests_parquet(out / "tests.parquet", results):
        log.info("no tests.parquet: pyarrow is not installed (pip install 'opbench[parquet]')")
    with open(out / "ops.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            [
                "op",
                "tests",
                "passed",
                "weak",
                "not_implemented",
                "correct",
                "speedup",
                "speedup_host",
                "failures",
            ]
        )
        for op, v in summary["ops"].items():
            w.writerow(
                [
                    op,
                    v.get("tests"),
                    v.get("passed"),
                    v.get("weak", 0),
                    v.get("not_implemented", 0),
                    v.get("correct"),
                    v.get("speedup"),
                    v.get("speedup_host"),
                    ";".join(f"{k}={n}" for k, n in (v.get("failures") or {}).items()),
                ]
            )
