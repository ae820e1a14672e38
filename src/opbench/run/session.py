"""One ``opbench run``: build the suite, select cases, execute, record, summarise.

The CLI is a thin layer over :func:`run`; everything a script needs (the request,
the summary dict) is plain data. What operator and program runs share (the request,
the checks, the worker configuration, the run directory) is in :mod:`opbench.run.setup`
and re-exported here; the outputs beside the results store in :mod:`opbench.run.outputs`.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from opbench.report import metrics
from opbench.run.machine import environment, gpu_state
from opbench.run.outputs import write_outputs
from opbench.run.setup import (
    RunError,
    RunRequest,
    check_backend_spec,
    check_device,
    cpu_share,
    devices_for,
    is_program_run,
    judging_threads,
    open_run_dir,
    worker_config,
)
from opbench.run.shards import in_shard, parse_shard
from opbench.run.store import ResultStore, TestResult
from opbench.spec.args import DTYPE_BY_NAME, iter_tensor_specs, parse_args
from opbench.spec.judge_options import JudgeOptions
from opbench.spec.ops import select_ops
from opbench.spec.reference import is_reference_backend
from opbench.suites.case import Case

__all__ = [
    "SUITES",
    "RunError",
    "RunRequest",
    "SuiteSelection",
    "check_backend_spec",
    "check_device",
    "coverage_of",
    "cpu_share",
    "devices_for",
    "load_suite_cases",
    "parse_dtypes",
    "run",
    "run_operators",
    "select_cases",
    "summarize",
    "unfinished_summary",
]

SUITES = ("smoke", "opinfo", "traces", "torchbench", "programs")


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
        return build_trace_cases(
            source, suite=name, seed=req.seed, device=req.device, split=req.trace_split
        )
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
    """Apply ``--ops``, ``--dtypes``, ``--limit-per-op`` and ``--shard``; find the
    not-tested ops (an op whose tests all fall in other parts is not one)."""
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
    # only the asked ops' cases go on (the sort below parses each case's arguments: all
    # 18,208 trace cases took 4.4 s of a two-op README run, 2026-11-28)
    all_cases = [c for c in all_cases if c.op in asked]
    if req.limit_per_op is not None:
        # The first N of an op should be informative: zero-size cases (whose right answer
        # is trivial, so they are weak tests) go after every other case of the op.
        all_cases = sorted(all_cases, key=_has_zero_size)
    for c in all_cases:
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
    if req.shard:  # after --limit-per-op: the parts split what an unsharded run judges
        k, n = parse_shard(req.shard)
        chosen = [c for c in chosen if in_shard(c.test_id, k, n)]
    return SuiteSelection(chosen, asked, not_tested, excluded, coverage_of(chosen))


def run(req: RunRequest, on_progress: Callable[[str, Any], None] | None = None) -> dict[str, Any]:
    """Execute a run and return its summary (also written to ``RUN_DIR/summary.json``):
    whole programs (KernelBench format) go to their own runner, operators to
    :func:`run_operators`. The one place the two kinds of run part."""
    if is_program_run(req):
        if req.shard is not None:
            raise RunError("--shard splits an operator suite's tests, not program problems")
        from opbench.programs.runner import run_programs

        return run_programs(req, on_progress)
    return run_operators(req, on_progress)


def run_operators(
    req: RunRequest, on_progress: Callable[[str, Any], None] | None = None
) -> dict[str, Any]:
    """Execute an operator run (a suite of cases against a backend) and return its
    summary."""
    progress = on_progress or (lambda kind, payload: None)
    check_device(req.device)
    check_backend_spec(req.backend)
    if req.trace_split is not None:
        from opbench.suites.trace_split import HALVES

        if req.suite.partition(":")[0] not in ("traces", "torchbench"):
            raise RunError("--trace-split applies to the traces suite only")
        if req.trace_split not in HALVES:
            raise RunError(f"--trace-split must be one of {', '.join(HALVES)}")
    if req.shard is not None:
        try:
            parse_shard(req.shard)
        except ValueError as e:
            raise RunError(str(e)) from None
    out, store, done = open_run_dir(req)
    judge_options = JudgeOptions(
        rtol_scale=req.rtol_scale,
        atol_scale=req.atol_scale,
        allow_pytorch=req.allow_pytorch,
        allow_threads="threads" in (req.allow_rules or []),
        native_calls=not req.python_calls,
    )
    config = worker_config(req, judge_options)
    if (
        req.device.startswith("cuda")
        and judge_options.native_calls
        and not is_reference_backend(req.backend)
    ):
        # the C++ gate the workers call declared kernels through, built here once before
        # they start (each then loads it; a sandboxed one from a copy): workers racing for
        # the build lock, or unable to write it, would each fall back to Python calls
        from opbench.backends.native.build import gate_module

        gate_module()
    from opbench.run.isolation import IsolationPlanner

    planner = IsolationPlanner(config.backend, req.kernel_version, frozenset(req.allow_rules or []))
    ray_executor = None
    if req.executor == "ray":
        from opbench.run.ray_executor import RayExecutor

        ray_executor = RayExecutor(config, req, store, judge_options, planner)
        ray_executor.start()  # Ray and its actors start while the suite is built
    try:
        return _run_operators(
            req, progress, out, store, done, judge_options, config, planner, ray_executor
        )
    finally:
        if ray_executor is not None:
            ray_executor.close()  # what start made, if the run never used it


def _run_operators(
    req: RunRequest,
    progress: Callable[[str, Any], None],
    out: Path,
    store: Any,
    done: set[str],
    judge_options: JudgeOptions,
    config: Any,
    planner: Any,
    ray_executor: Any,
) -> dict[str, Any]:
    """:func:`run_operators` once the run directory, the workers' configuration and
    (for ``--executor ray``) the starting Ray slots exist."""
    executor: Any = None
    if ray_executor is None and req.executor == "local":
        from opbench.run.executor import ExecutionOptions, LocalExecutor
        from opbench.run.warm_up import WARM_BY_SUITE

        executor = LocalExecutor(
            config,
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
        # workers and judging processes start while the suite is built
        executor.prestart(warm=WARM_BY_SUITE.get(req.suite.partition(":")[0], ()))
    try:
        return _build_and_run(req, progress, out, store, done, planner, ray_executor, executor)
    finally:
        if executor is not None:
            executor.release()


def _build_and_run(
    req: RunRequest,
    progress: Callable[[str, Any], None],
    out: Path,
    store: Any,
    done: set[str],
    planner: Any,
    ray_executor: Any,
    local_executor: Any,
) -> dict[str, Any]:
    """:func:`_run_operators` once its executor exists (started, local or Ray)."""
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

    for unit in {planner.unit_of(c.op) for c in cases}:
        planner.scan(unit)  # every kernel the run selects, before any is imported
    t_run = time.perf_counter()
    gpu_start = gpu_state(req.device)
    sandbox_level = None
    worker_info: dict[str, Any] = {}
    if todo:
        executor = ray_executor if ray_executor is not None else local_executor
        if executor is None:
            raise RunError(f"unknown --executor {req.executor!r}; choose local or ray")
        # The judging process gets its share of the cores too, for this run only.
        with judging_threads(req.workers if req.executor == "local" else None):
            executor.run(todo, lambda r: progress("result", r))
        sandbox_level = executor.sandbox_level
        worker_info = executor.worker_info
    run_s = time.perf_counter() - t_run

    selected_ids = {c.test_id for c in cases}
    results = [r for r in store.results() if r.test_id in selected_ids]
    summary = summarize(req, selection, results, out)
    summary["coverage"] = selection.coverage
    summary["timing_s"] = {"build_suite": round(build_s, 3), "run": round(run_s, 3)}
    if worker_info.get("slots_start_s"):
        summary["timing_s"]["slots_start"] = worker_info["slots_start_s"]
    summary["resumed"] = bool(done) and req.resume
    unfinished = unfinished_summary(cases, results, worker_info.get("unfinished") or [])
    if unfinished:
        summary["unfinished"] = unfinished
    if worker_info.get("ray"):
        summary["ray"] = worker_info["ray"]  # which Ray nodes ran the tests
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
