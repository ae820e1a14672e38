"""Deciding a test, in the HARNESS, from raw data the worker sent.

The harness never imports candidate code. For each test it

1. plans the trials (:func:`opbench.judge.expectations.plan_trials`, which also holds
   what is expected of each seed): the case's seed, ``trials - 1`` seeds
   derived from it (same shapes, new values: a kernel that caches results by shape or
   pointer fails the second), and, when every one of those would also accept a trivial
   answer, a re-drawn seed whose inputs do not (``details["redrawn_seed"]``). It
   computes eager PyTorch's outputs and a float64 reference for each seed on the way,
   and keeps them for step 3;
2. sends the case and the plan to a worker, which runs the kernel on fresh inputs for
   each seed and once more on the first seed's inputs, and sends back raw data
   (:mod:`opbench.instrument.candidate`): outputs, each input's storage after the
   call, object ids and storage addresses, what the observers saw, what changed in
   its process;
3. judges (:func:`judge_report`) against its own copies: the mutation diff against
   the inputs it built itself, aliasing from the ids and addresses, the guard's rules
   on the recorded calls (:mod:`opbench.judge.guard`), values against its references,
   determinism by comparing the repeat's outputs with the first trial's, and weakness.

Determinism rule: a candidate whose repeat differs bitwise is ``nondeterministic``. It
fails unless PyTorch documents the op as nondeterministic on that device: random ops
(tagged ``nondeterministic_seeded``), ops tagged ``nondeterministic_bitwise``, and on
CUDA the ops listed in ``torch.use_deterministic_algorithms``'s documentation as
nondeterministic (:data:`CUDA_NONDETERMINISTIC`: atomics-based scatter/index
accumulation, pooling/upsampling backwards, ...); for those it is a warning in
``details``. On CPU the tags apply, plus :data:`CPU_NONDETERMINISTIC` (measured).
It is also only a warning when eager PyTorch itself differs between two runs on the
same inputs.

Weak tests: a trial is weak when a trivial answer (zeros, a constant, a copy of the
first input) would pass its tolerance. The test is ``weak`` (left out of the verdict)
only when every trial is weak.

The aten backend's kernel is the judged ``OpOverload`` itself; the guard skips it (see
:func:`opbench.spec.reference.is_reference_backend`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from opbench.instrument.records import CandidateReport, TrialPlan, TrialResult
from opbench.judge import correctness as corr
from opbench.judge import guard as guard_mod
from opbench.judge.expectations import (
    Expectations,
    Expected,
    NotRunnableHere,
    eager_again,
    eager_is_deterministic,
    expect,
    generator_dependent_outputs,
    is_random,
    plan_trials,
    storages_of,
    trial_seeds,
    trivial_for,
    with_aliases,
)
from opbench.spec.call import (
    UNINITIALIZED_OPS,
    arg_names,
    is_written,
    variant_kind,
    written_args,
)
from opbench.spec.judge_options import JudgeOptions
from opbench.spec.ops import get_overload
from opbench.suites.case import Case, derive_seed

__all__ = [
    "JudgeOptions",
    "TrialPlan",
    "TrialResult",
    "CandidateReport",
    "Verdict",
    "Expectations",
    "plan_trials",
    "judge_report",
    "judge_in_process",
    "trial_seeds",
    "derive_seed",
    "CUDA_NONDETERMINISTIC",
]

log = logging.getLogger(__name__)

#: Ops PyTorch documents as nondeterministic on CUDA (``torch.use_deterministic_algorithms``).
CUDA_NONDETERMINISTIC: frozenset[str] = frozenset(
    """
    index_add index_put _index_put_impl put scatter_add scatter_reduce scatter index_copy
    index_reduce embedding_dense_backward _embedding_bag _embedding_bag_backward
    _embedding_bag_dense_backward _embedding_bag_per_sample_weights_backward embedding_bag
    avg_pool3d_backward adaptive_avg_pool2d_backward _adaptive_avg_pool2d_backward
    adaptive_avg_pool3d_backward _adaptive_avg_pool3d_backward adaptive_max_pool2d_backward
    adaptive_max_pool3d_backward fractional_max_pool2d_backward fractional_max_pool3d_backward
    max_pool3d_with_indices_backward max_unpool1d max_unpool2d max_unpool3d
    upsample_linear1d_backward upsample_bilinear2d_backward upsample_bicubic2d_backward
    upsample_trilinear3d_backward _upsample_bilinear2d_aa_backward
    reflection_pad1d_backward reflection_pad2d_backward reflection_pad3d_backward
    replication_pad1d_backward replication_pad2d_backward replication_pad3d_backward
    nll_loss2d_forward nll_loss2d_backward _ctc_loss_backward ctc_loss histc bincount
    kthvalue median nanmedian grid_sampler_2d_backward grid_sampler_3d_backward cumsum
    _segment_reduce_backward segment_reduce
    """.split()
)


#: Ops measured to be bitwise nondeterministic in eager PyTorch on CPU (multi-threaded
#: LAPACK): ``linalg_lstsq`` (gelsy driver) differs in the last bits from run to run.
CPU_NONDETERMINISTIC: frozenset[str] = frozenset({"linalg_lstsq"})

STATUSES = ("passed", "failed", "not_implemented", "skipped")


@dataclass
class Verdict:
    """The judge's decision on one test. ``details`` is JSON-serialisable."""

    status: str
    category: str | None
    message: str
    weak: bool = False
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    details: dict[str, Any] = field(default_factory=dict)


def _defined_equal(
    overload: torch._ops.OpOverload, a: Any, b: Any, undefined: frozenset[str]
) -> bool:
    """Bitwise equality of two runs' outputs, ignoring outputs whose values are undefined
    (``undefined``: their paths, from :func:`undefined_outputs`)."""
    base = overload._schema.name.removeprefix("aten::")
    if base in UNINITIALIZED_OPS:
        return True
    if not undefined:
        return corr.bitwise_equal(a, b)
    la, lb = corr.leaves(a), corr.leaves(b)
    return len(la) == len(lb) and all(
        p in undefined or corr.bitwise_equal(x, y) for (p, x), (_, y) in zip(la, lb)
    )


def _diff_summary(a: Any, b: Any) -> str:
    la, lb = corr.leaves(a), corr.leaves(b)
    for (p, x), (_, y) in zip(la, lb):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and x.shape == y.shape:
            if not corr.bitwise_equal(x, y):
                if x.dtype.is_floating_point and x.numel():
                    d = (x.double() - y.double()).abs()
                    d = d[torch.isfinite(d)]
                    m = float(d.max()) if d.numel() else float("nan")
                    return (
                        f"output{p} differs between two runs on identical inputs (max diff {m:.3g})"
                    )
                return f"output{p} differs between two runs on identical inputs"
    return "outputs differ between two runs on identical inputs"


# --------------------------------------------------------------------------- harness side


def _documented_nondeterministic(op: str, overload: torch._ops.OpOverload, device: str) -> bool:
    if is_random(overload) or torch.Tag.nondeterministic_bitwise in overload.tags:
        return True
    if op.split(".", 1)[0].rstrip("_") in CPU_NONDETERMINISTIC:
        return True
    if str(device).startswith("cuda"):
        base = op.split(".", 1)[0]
        return base.rstrip("_") in CUDA_NONDETERMINISTIC or base in CUDA_NONDETERMINISTIC
    return False


def _fail(category: str, message: str, **kw: Any) -> Verdict:
    return Verdict("failed", category, message, **kw)


def judge_report(
    case: Case,
    report: CandidateReport,
    device: str,
    options: JudgeOptions,
    expectations: Expectations | None = None,
    *,
    guard: bool = True,
) -> Verdict:
    """Decide a test from the worker's report, with references computed here
    (``expectations`` from :func:`plan_trials` are reused; missing seeds are computed).
    ``guard``: False only when the backend is PyTorch itself (the harness knows the
    backend; a report that says its calls were not observed is not taken on trust)."""
    try:
        return _judge(case, report, device, options, dict(expectations or {}), guard)
    except NotRunnableHere as e:
        return Verdict("skipped", None, str(e))


def judge_in_process(
    case: Case,
    kernel: Callable[..., Any],
    device: str,
    options: JudgeOptions,
) -> Verdict:
    """Plan, run and judge ``kernel`` in this process: for trusted kernels only (tests,
    ``opbench repro`` scripts). Runs that judge candidates use worker processes."""
    from opbench.instrument.candidate import run_candidate

    plan, expectations = plan_trials(case, device, options)
    report = run_candidate(case, kernel, device, options, plan)
    guard = not guard_mod.is_reference_kernel(kernel, get_overload(case.op))
    return judge_report(case, report, device, options, expectations, guard=guard)


def compare_kwargs(case: Case, options: JudgeOptions, exp: Expected) -> dict[str, Any]:
    """The correctness rule's settings for one case (tolerance scales, the op's name), and
    where to compare: on the GPU the harness computed eager and the reference on. On the
    CPU the comparisons of large outputs were most of a GPU run's wall time: the traced
    ``_log_softmax_backward_data`` of [1024, 50265] took 42 s in the harness against 16 s
    in the worker (H100 host, traces run, 76 tests: 283 s wall, 111 s in workers)."""
    return dict(
        op=case.op,
        rtol_scale=options.rtol_scale,
        atol_scale=options.atol_scale,
        max_in_numel=exp.max_in_numel,
        work_device=exp.device if exp.device.startswith("cuda") else None,
    )


def compare_to_expected(
    exp: Expected,
    outputs: Any,
    output_meta: list[dict[str, Any]],
    cmp_kw: dict[str, Any],
    *,
    meta_only: frozenset[str] | set[str] | bool,
) -> corr.Comparison:
    """A candidate's outputs (as a worker sent them) against the harness's eager and
    float64 outputs for the same seed, under :func:`compare_kwargs`' settings."""
    res = corr.compare_outputs(
        outputs,
        exp.eager,
        exp.ref,
        cand_devices=corr.devices_from_meta(output_meta),
        eager_devices={m["path"]: m["device"] for m in exp.eager_meta if "device" in m},
        meta_only=meta_only,
        **cmp_kw,
    )
    if cmp_kw.get("work_device"):
        # the worker timing the next test shares this GPU: hand back the blocks the
        # comparison's float32/float64 copies took
        torch.cuda.empty_cache()
    return res


def _label(idx: int, tr: TrialResult) -> str:
    if idx == 0:
        return ""
    return f"trial {idx + 1} (seed {tr.seed}{', re-drawn' if tr.redraw else ''}): "


def _top_arg(path: str) -> str:
    """``args[1][0]`` -> ``1``; ``kwargs['out']`` -> ``out``."""
    return path.split("]", 1)[0].removeprefix("args[").removeprefix("kwargs[").strip("'\"")


def _mutations(tr: TrialResult, exp: Expected) -> dict[str, int]:
    """Inputs whose storage differs after the call from the harness's own copy made
    before it: path -> elements changed (-1: the layout changed; 1 at least, when only
    digests could be compared)."""
    changed: dict[str, int] = {}
    for p, m in exp.inputs.items():
        after = tr.input_meta_after.get(p)
        if after is None or after.get("unreadable"):
            changed[p] = -1
            continue
        if after.get("shape") != m["shape"] or after.get("stride") != m["stride"]:
            changed[p] = -1
            continue
        same_span = tr.inputs_digest.get(p) == tr.inputs_digest_before.get(p)
        same_elements = tr.elements_digest.get(p) == exp.element_digests.get(p)
        if same_span and same_elements:
            continue  # its storage as before the call, its elements as the harness built them
        before, now = exp.input_spans.get(p), tr.inputs_after.get(p)
        changed[p] = 1
        if (
            isinstance(before, torch.Tensor)
            and isinstance(now, torch.Tensor)
            and now.shape == before.shape
            and now.dtype == before.dtype
        ):
            if before.dtype.is_floating_point or before.dtype.is_complex:
                diff = ~((before == now) | (torch.isnan(before) & torch.isnan(now)))
            else:
                diff = before != now
            changed[p] = max(1, int(diff.sum()))
    return changed


def _judge(
    case: Case,
    report: CandidateReport,
    device: str,
    options: JudgeOptions,
    expectations: Expectations,
    guard: bool,
) -> Verdict:
    overload = get_overload(case.op)
    kind = variant_kind(overload)
    written = written_args(overload)
    names = arg_names(overload)
    returns_alias = any(r.alias_info is not None for r in overload._schema.returns)
    base = overload._schema.name.removeprefix("aten::")
    uninitialized = base in UNINITIALIZED_OPS
    details: dict[str, Any] = {"trials": [t.seed for t in report.trials]}
    warnings: list[str] = []
    if not report.trials:
        return _fail("error", "the worker sent no trial")
    # tampering anywhere (a trial, the repeat, the observer) decides the test
    everything = [*report.trials, *([report.repeat] if report.repeat else [])]
    calls: dict[tuple[str, bool], int] = {}
    for tr in everything:
        for n, into, k in tr.calls:
            calls[(n, into)] = calls.get((n, into), 0) + int(k)
    guard_all, silenced = guard_mod.classify_trial(
        case.op, [(n, into, k) for (n, into), k in calls.items()], report.observed
    )
    tamper = [line for tr in everything for line in tr.tamper] + silenced
    if guard and any(tr.guard != "on" for tr in everything):
        tamper.append("the worker ran the kernel without its call observers")
    if tamper:
        return _fail(
            "tampering",
            f"the kernel changed the judge's process: {'; '.join(tamper[:5])}",
            details={**details, "tampering": tamper},
        )
    if len([t for t in report.trials if not t.redraw]) < max(1, options.trials) and all(
        t.status == "ok" for t in report.trials
    ):
        return _fail("error", "the worker ran fewer trials than asked")

    def expected_for(seed: int) -> Expected:
        if seed not in expectations:
            expectations[seed] = expect(case, overload, device, seed)  # may raise
        return expectations[seed]

    # random ops: values that vary with the generator are not comparable; the outputs
    # that do not (cuDNN RNN's output and states next to its reserve space) still are
    generator_dependent: frozenset[str] = frozenset()
    if is_random(overload):
        seed0 = report.trials[0].seed
        b = eager_again(case, overload, device, seed0)
        varying = generator_dependent_outputs(expected_for(seed0).eager, b)
        if varying is None:
            return Verdict(
                "skipped", None, "random op: its values depend on the generator, not judged"
            )
        if varying:
            generator_dependent = varying
            details["generator_dependent_outputs"] = sorted(varying)

    worst_abs: float | None = None
    worst_rel: float | None = None
    weak_flags: list[bool] = []
    trivial_seen: dict[int, list[str]] = {}
    previous: list[tuple[Any, Any]] = []  # (candidate outputs, eager) of earlier trials
    for idx, tr in enumerate(report.trials):
        label = _label(idx, tr)
        if tr.status == "skipped":
            return Verdict("skipped", None, f"inputs not runnable: {tr.message}")
        exp = expected_for(tr.seed)  # raises NotRunnableHere
        if exp.ref_note:
            details["reference"] = exp.ref_note
        if tr.status == "not_implemented":
            return Verdict(
                "not_implemented", "not_implemented", label + f"kernel declined: {tr.message}"
            )
        # 1. the guard, over every call of the test (also for a kernel that raised:
        # delegating, then failing, is no excuse)
        if guard:
            g = guard_all
            if g.allowed:
                details.setdefault("allowed_calls", g.allowed)
            if not g.ok:
                if not options.allow_pytorch:
                    return _fail(
                        "calls_pytorch",
                        g.message(),
                        details={**details, "calls": g.violations},
                    )
                if g.message() not in warnings:
                    warnings.append(g.message())
                details["calls_pytorch"] = g.violations
        else:
            details["guard"] = "skipped: the kernel is the judged ATen overload itself"
        if tr.status == "error":
            return _fail(
                "error",
                label + f"{tr.error_type}: {tr.message}",
                details={**details, "traceback": tr.traceback or ""},
            )
        # 2. outputs must be plain tensors with real storage
        problems = guard_mod.output_problems_from_meta(tr.output_meta)
        if problems:
            return _fail("cheat", label + "; ".join(problems), details=details)
        # 3. aliasing: in-place returns self, out= returns out, functional returns new tensors
        bad = _alias_problem(case.op, kind, tr, exp, returns_alias)
        if bad:
            return _fail("bad_alias", label + bad, details=details)
        # 4. inputs the op must not write are unchanged (against the harness's own copy)
        for path, n in _mutations(tr, exp).items():
            top = _top_arg(path)
            arg_name = names[int(top)] if top.isdigit() and int(top) < len(names) else top
            if is_written(top, overload, written):
                continue
            what = "its layout changed" if n < 0 else f"{n} elements changed"
            return _fail(
                "mutates_input",
                label + f"the kernel wrote into input {path} ({arg_name}), which {case.op} "
                f"must not modify: {what}",
                details=details,
            )
        # 5. values (and written arguments such as running statistics)
        cmp_kw = compare_kwargs(case, options, exp)
        res = compare_to_expected(
            exp,
            tr.outputs,
            tr.output_meta,
            cmp_kw,
            meta_only=True if uninitialized else exp.undefined | generator_dependent,
        )
        if res.ok and exp.eager_written:
            res = _compare_written(tr, exp, cmp_kw)
        if not res.ok:
            if res.category == "wrong_result":
                for j, (prev_c, prev_e) in enumerate(previous):
                    if corr.bitwise_equal(tr.outputs, prev_c) and not corr.bitwise_equal(
                        exp.eager, prev_e
                    ):
                        return _fail(
                            "cheat",
                            label + f"returned exactly the output of trial {j + 1} for "
                            "different inputs (results cached by shape or pointer?)",
                            max_abs_err=res.max_abs_err,
                            max_rel_err=res.max_rel_err,
                            details=details,
                        )
            return _fail(
                res.category or "wrong_result",
                label + res.message,
                max_abs_err=res.max_abs_err,
                max_rel_err=res.max_rel_err,
                details={**details, **({"compare": res.details} if res.details else {})},
            )
        if res.details:
            details.setdefault("compare", res.details)
        # strides, where the contract fixes them: in-place and out= keep eager's layout
        if kind in ("inplace", "out"):
            bad = _stride_problem(kind, tr, exp)
            if bad:
                return _fail("wrong_meta", label + bad, details=details)
        if res.max_abs_err is not None:
            worst_abs = max(worst_abs or 0.0, res.max_abs_err)
        if res.max_rel_err is not None:
            worst_rel = max(worst_rel or 0.0, res.max_rel_err)
        previous.append((tr.outputs, exp.eager))
        # 6. weak?
        unreliable = _eager_unreliable(res.details)
        if uninitialized:
            weak_flags.append(True)
            trivial_seen[tr.seed] = ["any values (uninitialised output)"]
        elif unreliable:
            weak_flags.append(True)
            trivial_seen[tr.seed] = [f"anything: eager PyTorch is unreliable here ({unreliable})"]
        elif options.check_weak and (not weak_flags or all(weak_flags)):
            # (once one trial is not weak the test is not weak: later trials skip the check)
            triv = trivial_for(case, overload, exp, options)
            weak_flags.append(bool(triv))
            if triv:
                trivial_seen[tr.seed] = triv
        else:
            weak_flags.append(False)

    # 7. determinism: the repeat on the first trial's inputs, compared here
    repeat_detail = ""
    repeat_differs = False
    if options.check_determinism and report.repeat is not None and report.trials:
        rep, first = report.repeat, report.trials[0]
        if rep.status != "ok":
            repeat_differs = True
            repeat_detail = f"the repeat on identical inputs raised: {rep.message}"
        else:
            undefined = expected_for(first.seed).undefined
            if not _defined_equal(overload, rep.outputs, first.outputs, undefined):
                repeat_differs = True
                repeat_detail = _diff_summary(rep.outputs, first.outputs)
    if repeat_differs and not uninitialized:
        if _documented_nondeterministic(case.op, overload, device):
            warnings.append(
                f"nondeterministic (allowed for {case.op} on {device}): {repeat_detail}"
            )
        elif not eager_is_deterministic(case, overload, device, report.trials[0].seed):
            warnings.append(
                f"nondeterministic (so is eager PyTorch on these inputs): {repeat_detail}"
            )
        else:
            return _fail(
                "nondeterministic",
                f"{repeat_detail}; PyTorch's {case.op} is deterministic on {device}",
                max_abs_err=worst_abs,
                max_rel_err=worst_rel,
                details=details,
            )
    redrawn = [t.seed for t in report.trials if t.redraw]
    if redrawn:
        details["redrawn_seed"] = redrawn[0]
    if report.redraw_seeds_tried:
        details["redraw_seeds_tried"] = list(report.redraw_seeds_tried)
    weak = bool(weak_flags) and all(weak_flags)
    if trivial_seen:
        details["trivial_answers_pass"] = {str(k): v for k, v in trivial_seen.items()}
    if warnings:
        details["warnings"] = warnings
    msg = ""
    if weak:
        kinds = sorted({k for v in trivial_seen.values() for k in v})
        msg = (
            f"weak test: a trivial answer ({', '.join(kinds)}) would also pass; "
            "left out of the verdict"
        )
    elif warnings:
        msg = "; ".join(warnings)
    return Verdict(
        "passed",
        None,
        msg,
        weak=weak,
        max_abs_err=worst_abs,
        max_rel_err=worst_rel,
        details=details,
    )


def _eager_unreliable(details: dict[str, Any] | None) -> str | None:
    """The reason eager PyTorch cannot judge this output, if a comparison found one."""
    if not details:
        return None
    if isinstance(details.get("eager_unreliable"), str):
        return details["eager_unreliable"]
    for v in details.values():  # per-output details of a structured comparison
        if isinstance(v, dict) and isinstance(v.get("eager_unreliable"), str):
            return v["eager_unreliable"]
    return None


def _returned_targets(tr: TrialResult) -> list[bool]:
    """For each ``self``/``out`` target: did the kernel return that very object (by the
    Python object ids the worker recorded), in its place among the outputs?"""
    leaves = tr.output_meta
    out = []
    for i, t in enumerate(tr.target_meta):
        if not t or "obj_id" not in t:
            out.append(False)
            continue
        out.append(i < len(leaves) and leaves[i].get("obj_id") == t["obj_id"])
    return out


def _target_moved(tr: TrialResult) -> bool:
    """Whether an in-place kernel swapped ``self``'s storage for a new one."""
    for before, after in zip(tr.target_meta, tr.target_after):
        if not before or not after or not before.get("storage_ptr"):
            continue
        if after.get("storage_ptr") != before["storage_ptr"]:
            return True
    return False


def _alias_problem(
    op: str, kind: str, tr: TrialResult, exp: Expected, returns_alias: bool
) -> str | None:
    """Why the outputs alias wrongly, or None."""
    if kind in ("inplace", "out"):
        what = "self" if kind == "inplace" else "out"
        returned = _returned_targets(tr)
        if not returned or not all(returned):
            return (
                f"{op} must return its {what} tensor (the same object); "
                "the kernel returned another object"
            )
        if kind == "inplace" and _target_moved(tr):
            return "the in-place kernel moved self to new storage instead of writing it"
        return None
    if returns_alias:
        return None
    eager_aliasing = {m["path"] for m in exp.eager_meta if m.get("aliases_input")}
    storages = storages_of(tr.input_meta)
    for m in with_aliases([dict(m) for m in tr.output_meta], storages):
        if m.get("aliases_input") and m["path"] not in eager_aliasing:
            return (
                f"output{m['path']} shares storage with input {m['aliases_input']}; "
                f"{op} returns a new tensor"
            )
    return None


def _stride_problem(kind: str, tr: TrialResult, exp: Expected) -> str | None:
    """In-place and out= results must keep the layout eager gives (self's / out's own)."""
    eager_by_path = {m["path"]: m for m in exp.eager_meta if m.get("kind") == "tensor"}
    for m in tr.output_meta:
        e = eager_by_path.get(m["path"])
        if e is None or m.get("kind") != "tensor" or not m.get("shape"):
            continue
        if m.get("shape") == e.get("shape") and m.get("stride") != e.get("stride"):
            if any(s > 1 for s in m["shape"]) or m.get("storage_offset") != e.get("storage_offset"):
                return (
                    f"output{m['path']} has strides {m.get('stride')}, but "
                    f"{'self' if kind == 'inplace' else 'out'} must keep {e.get('stride')} "
                    "(as eager does)"
                )
    return None


def _compare_written(tr: TrialResult, exp: Expected, cmp_kw: dict[str, Any]) -> corr.Comparison:
    """Arguments the op writes besides its outputs (running statistics) must match eager."""
    for path, eager_val in exp.eager_written.items():
        cand_val = tr.written_after.get(path)
        if not isinstance(cand_val, torch.Tensor):
            return corr.Comparison(
                "wrong_result", f"the worker did not report written argument {path}"
            )
        ref_val = exp.ref_written.get(path)
        res = corr.compare_tensor(cand_val, eager_val, ref_val, path="", **cmp_kw)
        if not res.ok:
            res.message = f"written argument {path}: " + res.message.removeprefix("output: ")
            return res
    return corr.Comparison()


def verdict_to_dict(v: Verdict) -> dict[str, Any]:
    """A plain dict of a verdict (for JSON)."""
    return asdict(v)
