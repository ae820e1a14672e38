"""The per-test pipeline, split between the untrusted worker and the trusted harness.

* :func:`run_candidate` runs in the WORKER (where candidate kernels are imported): for
  each trial seed it materialises fresh inputs, runs the kernel under the guard's
  dispatch recorder, and records what came back (outputs copied to the CPU, their
  types and layouts, which inputs changed, whether ``self``/``out`` was returned) in a
  plain-data :class:`CandidateReport`. It decides nothing.
* :func:`judge_report` runs in the HARNESS, which never imports candidate code: it
  rebuilds the same inputs from the same seeds, computes eager PyTorch's output and a
  float64 reference itself, and turns the report into a :class:`Verdict`.

Trials: the case's seed, then ``trials - 1`` seeds derived from it (same shapes, new
values), so a kernel that caches results by shape or pointer fails the second trial.
A repeat of the first trial on identical inputs checks determinism.

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
first input) would pass its tolerance. For ``args`` cases the worker re-draws up to
:data:`REDRAWS` new seeds when its first trials look trivial and runs one that is not
as an extra trial (``details["redrawn_seed"]``). The test is ``weak`` (left out of the
verdict) only when every trial is weak.

The aten backend's kernel is the judged ``OpOverload`` itself; the guard skips it (see
:func:`opbench.judge.guard.is_reference_kernel`).
"""

from __future__ import annotations

import contextlib
import logging
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import torch

from opbench.judge import correctness as corr
from opbench.judge import guard as guard_mod
from opbench.spec.ops import get_overload
from opbench.suites.case import Case, derive_seed

__all__ = [
    "JudgeOptions",
    "TrialResult",
    "CandidateReport",
    "Verdict",
    "run_candidate",
    "judge_report",
    "trial_seeds",
    "derive_seed",
    "CUDA_NONDETERMINISTIC",
]

log = logging.getLogger(__name__)

# Captured at import, before any candidate code can patch them.
_clone = torch.Tensor.clone
_detach = torch.Tensor.detach
_to = torch.Tensor.to
_as_strided = torch.Tensor.as_strided
_equal = torch.equal

#: Extra seeds the worker tries when the first trials of an ``args`` case look trivial.
REDRAWS = 3

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

#: Ops whose outputs are uninitialised memory: only shape, dtype and device are judged.
UNINITIALIZED_OPS: frozenset[str] = frozenset(
    """
    empty empty_like empty_strided new_empty new_empty_strided empty_permuted resize_
    resize_as_ _resize_output_ _empty_affine_quantized _empty_per_channel_affine_quantized
    """.split()
)

#: Ops whose answer is a constant by definition: "a constant" is not a lazy answer.
CONSTANT_OPS: frozenset[str] = frozenset(
    """
    zeros ones full fill zero new_zeros new_ones new_full zeros_like ones_like full_like
    scalar_tensor masked_fill index_fill
    """.split()
)

#: Outputs whose values are undefined (workspaces), by op base name and output path.
UNDEFINED_OUTPUTS: dict[str, frozenset[str]] = {
    "_ctc_loss": frozenset({"[1]"}),
    "_embedding_bag": frozenset({"[3]"}),
    "_embedding_bag_forward_only": frozenset({"[3]"}),
    # cuDNN's reserve space, kept for the backward pass: opaque, and its last bytes are
    # never written (on an H100, 214 of the last 256 of 24,576,256 bytes differed between
    # the worker's and the judge's run of the same inputs)
    "_cudnn_rnn": frozenset({"[3]"}),
}

#: Ops whose ``total_weight`` output (``[1]``) is undefined with ``reduction='none'``:
#: the backward never reads it then, and CUDA returns it uninitialised (an H200 run gave
#: -7.09 for it, no sum of class weights).
UNREDUCED_TOTAL_WEIGHT_OPS: frozenset[str] = frozenset({"nll_loss_forward", "nll_loss2d_forward"})


def undefined_outputs(
    overload: torch._ops.OpOverload, args: list[Any], kwargs: dict[str, Any]
) -> frozenset[str]:
    """Output paths whose values are undefined for these arguments (only their shape,
    dtype and device are judged)."""
    base = overload._schema.name.removeprefix("aten::")
    paths = UNDEFINED_OUTPUTS.get(base, frozenset())
    if base in UNREDUCED_TOTAL_WEIGHT_OPS:
        names = _arg_names(overload)
        i = names.index("reduction")
        reduction = kwargs.get("reduction", args[i] if i < len(args) else None)
        if reduction == 0:
            paths = paths | {"[1]"}
    return paths


#: Ops measured to be bitwise nondeterministic in eager PyTorch on CPU (multi-threaded
#: LAPACK): ``linalg_lstsq`` (gelsy driver) differs in the last bits from run to run.
CPU_NONDETERMINISTIC: frozenset[str] = frozenset({"linalg_lstsq"})

STATUSES = ("passed", "failed", "not_implemented", "skipped")


@dataclass
class JudgeOptions:
    """How strict the judge is. ``rtol_scale``/``atol_scale`` multiply the dtype floors
    (see :mod:`opbench.judge.correctness`); ``allow_pytorch`` turns ``calls_pytorch`` into
    a warning; ``trials`` is the number of input sets (>= 1)."""

    rtol_scale: float = 1.0
    atol_scale: float = 1.0
    allow_pytorch: bool = False
    trials: int = 2
    check_determinism: bool = True
    check_weak: bool = True


@dataclass
class TrialResult:
    """What happened when the candidate ran on one input set (plain data only)."""

    seed: int
    status: str = "ok"  # ok | error | not_implemented | skipped
    message: str = ""
    error_type: str | None = None
    traceback: str | None = None
    outputs: Any = None
    output_meta: list[dict[str, Any]] = field(default_factory=list)
    returned_targets: list[bool] = field(default_factory=list)
    target_ptr_same: list[bool] = field(default_factory=list)
    target_meta: list[dict[str, Any]] = field(default_factory=list)
    mutated: dict[str, int] = field(default_factory=dict)
    written_after: dict[str, Any] = field(default_factory=dict)
    calls: list[tuple[str, bool, int]] = field(default_factory=list)
    guard: str = "on"  # on | skipped
    elapsed_s: float = 0.0
    redraw: bool = False
    #: output paths with undefined values for these inputs (the worker's repeat check
    #: skips them; the judge works them out again for itself)
    undefined: list[str] = field(default_factory=list)


@dataclass
class CandidateReport:
    """The worker's account of a candidate on one case; judged by :func:`judge_report`."""

    op: str
    test_id: str
    trials: list[TrialResult] = field(default_factory=list)
    repeat_equal: bool | None = None
    repeat_detail: str = ""
    error: str | None = None
    skipped: str | None = None
    not_implemented: str | None = None
    redraw_seeds_tried: list[int] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_plain(cls, d: Any) -> CandidateReport:
        """Rebuild from the plain dict a worker sent (``opbench.run.protocol.to_plain``)."""
        if isinstance(d, CandidateReport):
            return d
        if not isinstance(d, dict):
            raise TypeError(f"report is a {type(d).__name__}, not a dict")
        names = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in names}
        trials = []
        tnames = {f.name for f in fields(TrialResult)}
        for t in kw.get("trials") or []:
            if isinstance(t, TrialResult):
                trials.append(t)
                continue
            if not isinstance(t, dict):
                raise TypeError("malformed trial in report")
            tk = {k: v for k, v in t.items() if k in tnames}
            tk["calls"] = [tuple(c) for c in tk.get("calls") or []]
            trials.append(TrialResult(**tk))
        kw["trials"] = trials
        return cls(**kw)


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


# --------------------------------------------------------------------------- seeds


def trial_seeds(seed: int, trials: int) -> list[int]:
    """The case's seed, then ``trials - 1`` derived ones."""
    return [derive_seed(seed, i) for i in range(max(1, trials))]


# --------------------------------------------------------------------------- inputs


def _walk_inputs(args: list[Any], kwargs: dict[str, Any]) -> list[tuple[str, str, torch.Tensor]]:
    """``[(path, argument name or index, tensor)]`` for every tensor in the call."""
    out: list[tuple[str, str, torch.Tensor]] = []

    def rec(v: Any, path: str, top: str) -> None:
        if isinstance(v, torch.Tensor):
            out.append((path, top, v))
        elif isinstance(v, (list, tuple)):
            for i, x in enumerate(v):
                rec(x, f"{path}[{i}]", top)

    for i, a in enumerate(args):
        rec(a, f"args[{i}]", str(i))
    for k, a in kwargs.items():
        rec(a, f"kwargs[{k!r}]", k)
    return out


def _arg_names(overload: torch._ops.OpOverload) -> list[str]:
    return [a.name for a in overload._schema.arguments]


#: Arguments ops write although their schema does not say so (running statistics).
WRITES_NOT_IN_SCHEMA: dict[str, frozenset[str]] = {
    "native_batch_norm": frozenset({"running_mean", "running_var"}),
    "cudnn_batch_norm": frozenset({"running_mean", "running_var"}),
    "miopen_batch_norm": frozenset({"running_mean", "running_var"}),
}


def _written_args(overload: torch._ops.OpOverload) -> set[str]:
    """Schema names and positions of the arguments the op may write (``Tensor(a!)``, and
    :data:`WRITES_NOT_IN_SCHEMA`)."""
    out: set[str] = set()
    extra = WRITES_NOT_IN_SCHEMA.get(overload._schema.name.removeprefix("aten::"), frozenset())
    for i, a in enumerate(overload._schema.arguments):
        if (a.alias_info is not None and a.alias_info.is_write) or a.name in extra:
            out.add(a.name)
            out.add(str(i))
    return out


def _is_written(top: str, overload: torch._ops.OpOverload, written: set[str]) -> bool:
    """Whether the argument at ``top`` (a position or a keyword name) may be written."""
    if top in written:
        return True
    names = _arg_names(overload)
    return top.isdigit() and int(top) < len(names) and names[int(top)] in written


def _variant_kind(overload: torch._ops.OpOverload) -> str:
    from opbench.spec.variants import kind_of

    try:
        return kind_of(_op_name(overload))
    except (AttributeError, RuntimeError, ValueError):
        return "other"


def _op_name(overload: torch._ops.OpOverload) -> str:
    """``add.Tensor`` for ``torch.ops.aten.add.Tensor``."""
    return f"{overload._schema.name.removeprefix('aten::')}.{overload._overloadname}"


def _targets(overload: torch._ops.OpOverload, args: list[Any], kwargs: dict[str, Any]) -> list[Any]:
    """The tensors an in-place / ``out=`` overload must write and return, in order."""
    kind = _variant_kind(overload)
    names = _arg_names(overload)
    if kind == "inplace":
        return [args[0] if args else kwargs.get(names[0])]
    if kind == "out":
        from opbench.spec.variants import out_arg_names

        outs = []
        for n in out_arg_names(_op_name(overload)):
            if n in kwargs:
                outs.append(kwargs[n])
            elif n in names and names.index(n) < len(args):
                outs.append(args[names.index(n)])
            else:
                outs.append(None)
        return outs
    return []


def _span(t: torch.Tensor) -> torch.Tensor:
    """A 1-D view of the storage elements ``t`` reaches (holes and all)."""
    if t.numel() == 0:
        return t.reshape(0)
    n = 1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride()))
    return _as_strided(t, (n,), (1,), t.storage_offset())


def _snapshot(t: torch.Tensor) -> torch.Tensor:
    return _clone(_to(_detach(_span(t)), "cpu"))


def _meta(t: torch.Tensor) -> dict[str, Any]:
    return {
        "shape": list(t.shape),
        "stride": list(t.stride()),
        "storage_offset": int(t.storage_offset()),
        "dtype": str(t.dtype).removeprefix("torch."),
        "device": str(t.device),
        "data_ptr": int(t.data_ptr()) if t.numel() else 0,
        "storage_ptr": int(t.untyped_storage().data_ptr()) if t.numel() else 0,
    }


def _to_cpu_outputs(obj: Any) -> Any:
    """Copy outputs to the CPU, keeping tuples/lists/scalars; unknown objects -> repr."""
    if isinstance(obj, (tuple, list)):
        seq = [_to_cpu_outputs(v) for v in obj]
        return seq if isinstance(obj, list) else tuple(seq)
    if isinstance(obj, torch.Tensor):
        try:
            t = _detach(obj)
            if type(t) is not torch.Tensor:
                t = t.as_subclass(torch.Tensor)
            return _clone(_to(t, "cpu"))
        except Exception as e:  # a wrapper without data
            return f"<unreadable tensor: {type(e).__name__}: {e}>"
    if obj is None or isinstance(obj, (bool, int, float, complex, str)):
        return obj
    return f"<{type(obj).__module__}.{type(obj).__qualname__}: {obj!r}>"[:500]


def _output_meta(obj: Any, input_storages: dict[int, str], path: str = "") -> list[dict[str, Any]]:
    if isinstance(obj, (tuple, list)):
        out: list[dict[str, Any]] = []
        for i, v in enumerate(obj):
            out.extend(_output_meta(v, input_storages, f"{path}[{i}]"))
        return out
    m: dict[str, Any] = {"path": path, "type": f"{type(obj).__module__}.{type(obj).__qualname__}"}
    if isinstance(obj, torch.Tensor):
        m["kind"] = "tensor"
        m["problems"] = guard_mod.output_problems(obj, path)
        try:
            m.update(_meta(obj))
            if obj.numel():
                ptr = obj.untyped_storage().data_ptr()
                m["aliases_input"] = input_storages.get(ptr)
        except Exception as e:
            m["problems"].append(f"output{path}: metadata unreadable ({type(e).__name__})")
    elif obj is None:
        m["kind"] = "none"
    elif isinstance(obj, (bool, int, float, complex)):
        m["kind"] = "scalar"
    else:
        m["kind"] = "other"
    return [m]


@contextlib.contextmanager
def _seeded(overload: torch._ops.OpOverload, seed: int, device: str) -> Any:
    """For ops that draw from the global generator: hold the generator lock (the harness
    judges from several threads, and OpInfo samples are drawn from the same generator)
    and seed it. Other ops leave the generator alone: reseeding it here would change the
    samples another thread is drawing."""
    if not _is_random(overload):
        yield
        return
    from opbench.suites.opinfo import RNG_LOCK, seed_generators

    with RNG_LOCK:
        seed_generators(seed, device)
        yield


def _sync(device: str) -> None:
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def _short_tb(e: BaseException) -> str:
    lines = traceback.format_exception(type(e), e, e.__traceback__)
    return "".join(lines[-6:])[-3000:]


# --------------------------------------------------------------------------- worker side


def _run_trial(
    case: Case,
    kernel: Callable[..., Any],
    overload: torch._ops.OpOverload,
    device: str,
    seed: int,
    *,
    guard_on: bool,
) -> tuple[TrialResult, Any]:
    """One trial in the worker; returns the record and the raw outputs (on device)."""
    from opbench.suites.inputs import NotRunnable
    from opbench.suites.materialize import materialize

    tr = TrialResult(seed=seed, guard="on" if guard_on else "skipped")
    try:
        args, kwargs = materialize(case, device, seed)
    except NotRunnable as e:
        tr.status, tr.message = "skipped", str(e.reason)
        return tr, None
    tr.undefined = sorted(undefined_outputs(overload, args, kwargs))
    inputs = _walk_inputs(args, kwargs)
    snaps = {p: _snapshot(t) for p, _, t in inputs}
    metas = {p: _meta(t) for p, _, t in inputs}
    storages: dict[int, str] = {}
    for p, _, t in inputs:
        if t.numel():
            storages.setdefault(t.untyped_storage().data_ptr(), p)
    targets = _targets(overload, args, kwargs)
    tr.target_meta = [_meta(t) if isinstance(t, torch.Tensor) else {} for t in targets]
    recorder = guard_mod.DispatchRecorder([t for t in targets if isinstance(t, torch.Tensor)])
    t0 = time.perf_counter()
    try:
        if guard_on:
            with recorder:
                result = kernel(*args, **kwargs)
        else:
            result = kernel(*args, **kwargs)
        _sync(device)
    except NotImplementedError as e:
        tr.status, tr.message = "not_implemented", str(e) or "NotImplementedError"
        return tr, None
    except Exception as e:
        tr.status = "error"
        tr.error_type = type(e).__name__
        tr.message = str(e)[:2000]
        tr.traceback = _short_tb(e)
        return tr, None
    finally:
        tr.elapsed_s = time.perf_counter() - t0
        counts = Counter((c.name, c.into_target) for c in recorder.calls)
        tr.calls = [(n, into, k) for (n, into), k in sorted(counts.items())]
    tr.outputs = _to_cpu_outputs(result)
    tr.output_meta = _output_meta(result, storages)
    res_leaves = (
        [v for _, v in corr.leaves(result)] if isinstance(result, (tuple, list)) else [result]
    )
    for i, t in enumerate(targets):
        if not isinstance(t, torch.Tensor):
            tr.returned_targets.append(False)
            tr.target_ptr_same.append(False)
            continue
        returned = i < len(res_leaves) and res_leaves[i] is t
        if len(targets) == 1 and not isinstance(result, (tuple, list)):
            returned = result is t
        tr.returned_targets.append(bool(returned))
        tr.target_ptr_same.append(
            t.numel() == 0
            or tr.target_meta[i]["storage_ptr"] == 0
            or t.untyped_storage().data_ptr() == tr.target_meta[i]["storage_ptr"]
        )
    written = _written_args(overload)
    target_ids = {id(t) for t in targets}
    for p, top, t in inputs:
        if id(t) not in target_ids and _is_written(top, overload, written):
            tr.written_after[p] = _clone(_to(_detach(t), "cpu"))
    for p, _, t in inputs:
        before = snaps[p]
        m = metas[p]
        if list(t.shape) != m["shape"] or list(t.stride()) != m["stride"]:
            tr.mutated[p] = -1
            continue
        try:
            after = _snapshot(t)
        except RuntimeError:
            tr.mutated[p] = -1
            continue
        if not corr.bitwise_equal(before, after):
            if before.dtype.is_floating_point or before.dtype.is_complex:
                diff = ~((before == after) | (torch.isnan(before) & torch.isnan(after)))
            else:
                diff = before != after
            tr.mutated[p] = max(1, int(diff.sum()))
    return tr, result


def _looks_trivial(
    case: Case, overload: torch._ops.OpOverload, device: str, seed: int
) -> bool | None:
    """Worker-side probe: would a trivial answer match eager within the floors?

    None when eager PyTorch cannot run these inputs: such a seed is no re-draw candidate.
    """
    from opbench.suites.inputs import NotRunnable
    from opbench.suites.materialize import materialize

    try:
        args, kwargs = materialize(case, device, seed)
        first = next((t for _, _, t in _walk_inputs(args, kwargs)), None)
        first = _clone(_to(_detach(first), "cpu")) if first is not None else None
        eager = _to_cpu_outputs(overload(*args, **kwargs))
    except (NotRunnable, Exception):
        return None
    base = overload._schema.name.removeprefix("aten::")
    return bool(
        corr.trivial_answers(
            eager,
            None,
            first,
            op=case.op,
            allow_input_copy=not guard_mod.is_copy_like(case.op),
            allow_constant=base.rstrip("_") not in CONSTANT_OPS,
        )
    )


def run_candidate(
    case: Case, kernel: Callable[..., Any], device: str, options: JudgeOptions
) -> CandidateReport:
    """Run ``kernel`` on ``case`` in the worker and report what it did (no verdict).

    Never raises for a misbehaving kernel: its exceptions are recorded in the report.
    """
    overload = get_overload(case.op)
    guard_on = not guard_mod.is_reference_kernel(kernel, overload)
    report = CandidateReport(op=case.op, test_id=case.test_id)
    seeds = trial_seeds(case.seed, options.trials)
    first_outputs = None
    undefined: frozenset[str] = frozenset()
    for seed in seeds:
        tr, result = _run_trial(case, kernel, overload, device, seed, guard_on=guard_on)
        report.trials.append(tr)
        if tr.status != "ok":
            _summarise(report, tr)
            return report
        if first_outputs is None:
            first_outputs, undefined = tr.outputs, frozenset(tr.undefined)
        del result
    if options.check_weak and case.source in ("args", "opinfo"):
        from opbench.suites.materialize import special_seeds

        if all(_looks_trivial(case, overload, device, s) for s in seeds):
            # trace cases: new values from the same rules; OpInfo cases: the sample with
            # NaN, Inf and zeros injected (a new seed alone draws the same kind of values)
            candidates = (
                [derive_seed(case.seed, 1000 + j) for j in range(REDRAWS)]
                if case.source == "args"
                else special_seeds(case)
            )
            for s in candidates:
                report.redraw_seeds_tried.append(s)
                if _looks_trivial(case, overload, device, s) is False:
                    tr, _ = _run_trial(case, kernel, overload, device, s, guard_on=guard_on)
                    tr.redraw = True
                    report.trials.append(tr)
                    if tr.status != "ok":
                        _summarise(report, tr)
                        return report
                    break
    if options.check_determinism:
        tr, _ = _run_trial(case, kernel, overload, device, seeds[0], guard_on=False)
        if tr.status != "ok":
            report.repeat_equal = False
            report.repeat_detail = f"the repeat on identical inputs raised: {tr.message}"
        else:
            report.repeat_equal = _defined_equal(overload, tr.outputs, first_outputs, undefined)
            if not report.repeat_equal:
                report.repeat_detail = _diff_summary(tr.outputs, first_outputs)
    return report


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


def _summarise(report: CandidateReport, tr: TrialResult) -> None:
    if tr.status == "error":
        report.error = f"{tr.error_type}: {tr.message}"
    elif tr.status == "skipped":
        report.skipped = tr.message
    elif tr.status == "not_implemented":
        report.not_implemented = tr.message


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


def _upcast(v: Any) -> Any:
    if isinstance(v, torch.Tensor):
        if v.dtype in (torch.float16, torch.bfloat16, torch.float32) or (
            v.dtype.is_floating_point and v.dtype != torch.float64
        ):
            return v.detach().to(torch.float64)
        if v.dtype in (torch.complex32, torch.complex64):
            return v.detach().to(torch.complex128)
        return v
    if isinstance(v, list):
        return [_upcast(x) for x in v]
    if isinstance(v, tuple):
        return tuple(_upcast(x) for x in v)
    return v


def _cpu(obj: Any) -> Any:
    if isinstance(obj, (tuple, list)):
        seq = [_cpu(v) for v in obj]
        return seq if isinstance(obj, list) else tuple(seq)
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu().clone()
    return obj


def _is_random(overload: torch._ops.OpOverload) -> bool:
    return torch.Tag.nondeterministic_seeded in overload.tags


def _documented_nondeterministic(op: str, overload: torch._ops.OpOverload, device: str) -> bool:
    if _is_random(overload) or torch.Tag.nondeterministic_bitwise in overload.tags:
        return True
    if op.split(".", 1)[0].rstrip("_") in CPU_NONDETERMINISTIC:
        return True
    if str(device).startswith("cuda"):
        base = op.split(".", 1)[0]
        return base.rstrip("_") in CUDA_NONDETERMINISTIC or base in CUDA_NONDETERMINISTIC
    return False


@dataclass
class _Expected:
    eager: Any
    ref: Any
    first_input: torch.Tensor | None
    max_in_numel: int
    inputs: dict[str, dict[str, Any]]
    ref_note: str | None = None
    eager_meta: list[dict[str, Any]] = field(default_factory=list)
    eager_written: dict[str, Any] = field(default_factory=dict)
    ref_written: dict[str, Any] = field(default_factory=dict)
    undefined: frozenset[str] = frozenset()


class _NotRunnableHere(Exception):
    pass


def _written_values(
    overload: torch._ops.OpOverload, args: list[Any], kwargs: dict[str, Any]
) -> dict[str, torch.Tensor]:
    """CPU copies of the written, non-returned tensor arguments after a call."""
    written = _written_args(overload)
    target_ids = {id(t) for t in _targets(overload, args, kwargs)}
    return {
        p: t.detach().cpu().clone()
        for p, top, t in _walk_inputs(args, kwargs)
        if id(t) not in target_ids and _is_written(top, overload, written)
    }


def _expected(case: Case, overload: torch._ops.OpOverload, device: str, seed: int) -> _Expected:
    from opbench.suites.inputs import NotRunnable
    from opbench.suites.materialize import materialize

    try:
        args, kwargs = materialize(case, device, seed)
    except NotRunnable as e:
        raise _NotRunnableHere(f"inputs not runnable: {e.reason}") from None
    inputs = _walk_inputs(args, kwargs)
    metas = {p: _meta(t) for p, _, t in inputs}
    storages: dict[int, str] = {}
    for p, _, t in inputs:
        if t.numel():
            storages.setdefault(t.untyped_storage().data_ptr(), p)
    first = inputs[0][2].detach().cpu().clone() if inputs else None
    max_in = max((t.numel() for _, _, t in inputs), default=0)
    try:
        with _seeded(overload, seed, device):
            raw = overload(*args, **kwargs)
        _sync(device)
    except Exception as e:
        raise _NotRunnableHere(
            f"eager PyTorch rejects these inputs: {type(e).__name__}: {str(e)[:300]}"
        ) from None
    for _, leaf in corr.leaves(raw):
        if isinstance(leaf, torch.Tensor) and leaf.layout != torch.strided:
            raise _NotRunnableHere(
                f"eager returns a {leaf.layout} tensor; only strided outputs are judged"
            )
    eager_meta = _output_meta(raw, storages)
    eager = _cpu(raw)
    eager_written = _written_values(overload, args, kwargs)
    del raw
    ref = None
    ref_written: dict[str, Any] = {}
    note = None
    try:
        a64, k64 = materialize(case, device, seed)
        a64 = [_upcast(a) for a in a64]
        k64 = {k: _upcast(v) for k, v in k64.items()}
        with _seeded(overload, seed, device):
            ref = _cpu(overload(*a64, **k64))
        ref_written = _written_values(overload, a64, k64)
    except Exception as e:
        note = f"no float64 reference ({type(e).__name__}: {str(e)[:200]}); eager is the reference"
    return _Expected(
        eager,
        ref,
        first,
        max_in,
        metas,
        note,
        eager_meta,
        eager_written,
        ref_written,
        undefined_outputs(overload, args, kwargs),
    )


def _eager_is_deterministic(
    case: Case, overload: torch._ops.OpOverload, device: str, seed: int
) -> bool:
    """Whether eager PyTorch gives bitwise-identical outputs twice on these inputs."""
    from opbench.suites.materialize import materialize

    outs = []
    for _ in range(2):
        args, kwargs = materialize(case, device, seed)
        with _seeded(overload, seed, device):
            outs.append(_cpu(overload(*args, **kwargs)))
    return corr.bitwise_equal(outs[0], outs[1])


def _fail(category: str, message: str, **kw: Any) -> Verdict:
    return Verdict("failed", category, message, **kw)


def judge_report(
    case: Case, report: CandidateReport, device: str, options: JudgeOptions
) -> Verdict:
    """Decide a test from the worker's report, with references computed here."""
    try:
        return _judge(case, report, device, options)
    except _NotRunnableHere as e:
        return Verdict("skipped", None, str(e))


def _label(idx: int, tr: TrialResult) -> str:
    if idx == 0:
        return ""
    return f"trial {idx + 1} (seed {tr.seed}{', re-drawn' if tr.redraw else ''}): "


def _judge(case: Case, report: CandidateReport, device: str, options: JudgeOptions) -> Verdict:
    overload = get_overload(case.op)
    kind = _variant_kind(overload)
    written = _written_args(overload)
    names = _arg_names(overload)
    returns_alias = any(r.alias_info is not None for r in overload._schema.returns)
    base = overload._schema.name.removeprefix("aten::")
    uninitialized = base in UNINITIALIZED_OPS
    copy_like = guard_mod.is_copy_like(case.op)
    constant_like = base.rstrip("_") in CONSTANT_OPS
    details: dict[str, Any] = {"trials": [t.seed for t in report.trials]}
    warnings: list[str] = []
    if not report.trials:
        return _fail("error", "the worker sent no trial")
    if len([t for t in report.trials if not t.redraw]) < max(1, options.trials) and all(
        t.status == "ok" for t in report.trials
    ):
        return _fail("error", "the worker ran fewer trials than asked")

    # random ops: values that vary with the generator are not comparable; the outputs
    # that do not (cuDNN RNN's output and states next to its reserve space) still are
    generator_dependent: frozenset[str] = frozenset()
    first_expected: _Expected | None = None  # (the first trial reuses it)
    if _is_random(overload):
        seed0 = report.trials[0].seed
        first_expected = _expected(case, overload, device, seed0)
        b = _expected_eager_again(case, overload, device, seed0)
        varying = generator_dependent_outputs(first_expected.eager, b)
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
        if idx == 0 and first_expected is not None:
            exp = first_expected  # the same seed: eager and the reference are already here
        else:
            exp = _expected(case, overload, device, tr.seed)  # raises _NotRunnableHere
        if exp.ref_note:
            details["reference"] = exp.ref_note
        if tr.status == "not_implemented":
            return Verdict(
                "not_implemented", "not_implemented", label + f"kernel declined: {tr.message}"
            )
        if tr.status == "error":
            return _fail(
                "error",
                label + f"{tr.error_type}: {tr.message}",
                details={**details, "traceback": tr.traceback or ""},
            )
        # 1. outputs must be plain tensors with real storage
        problems = [p for m in tr.output_meta for p in m.get("problems", [])]
        if problems:
            return _fail("cheat", label + "; ".join(problems), details=details)
        # 2. the guard
        if tr.guard == "on":
            g = guard_mod.classify_calls(
                case.op, [(n, into) for n, into, k in tr.calls for _ in range(int(k))]
            )
            if g.allowed:
                details.setdefault("allowed_calls", g.allowed)
            if not g.ok:
                if not options.allow_pytorch:
                    return _fail(
                        "calls_pytorch",
                        label + g.message(),
                        details={**details, "calls": g.violations},
                    )
                if g.message() not in warnings:
                    warnings.append(g.message())
                details["calls_pytorch"] = g.violations
        else:
            details["guard"] = "skipped: the kernel is the judged ATen overload itself"
        # 3. aliasing: in-place returns self, out= returns out, functional returns new tensors
        bad = _alias_problem(case.op, kind, tr, exp, returns_alias)
        if bad:
            return _fail("bad_alias", label + bad, details=details)
        # 4. inputs the op must not write are unchanged
        for path, n in tr.mutated.items():
            top = path.split("]", 1)[0].removeprefix("args[").removeprefix("kwargs[").strip("'\"")
            arg_name = names[int(top)] if top.isdigit() and int(top) < len(names) else top
            if _is_written(top, overload, written):
                continue
            what = "its layout changed" if n < 0 else f"{n} elements changed"
            return _fail(
                "mutates_input",
                label + f"the kernel wrote into input {path} ({arg_name}), which {case.op} "
                f"must not modify: {what}",
                details=details,
            )
        # 5. values (and written arguments such as running statistics)
        devs = {m["path"]: m.get("device", "") for m in tr.output_meta if m.get("kind") == "tensor"}
        cmp_kw: dict[str, Any] = dict(
            op=case.op,
            rtol_scale=options.rtol_scale,
            atol_scale=options.atol_scale,
            max_in_numel=exp.max_in_numel,
        )
        res = corr.compare_outputs(
            tr.outputs,
            exp.eager,
            exp.ref,
            cand_devices=devs,
            eager_devices={m["path"]: m["device"] for m in exp.eager_meta if "device" in m},
            meta_only=True if uninitialized else exp.undefined | generator_dependent,
            **cmp_kw,
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
            triv = corr.trivial_answers(
                exp.eager,
                exp.ref,
                exp.first_input,
                allow_input_copy=not copy_like,
                allow_constant=not constant_like,
                **cmp_kw,
            )
            weak_flags.append(bool(triv))
            if triv:
                trivial_seen[tr.seed] = triv
        else:
            weak_flags.append(False)

    # 7. determinism
    if options.check_determinism and report.repeat_equal is False and not uninitialized:
        if _documented_nondeterministic(case.op, overload, device):
            warnings.append(
                f"nondeterministic (allowed for {case.op} on {device}): {report.repeat_detail}"
            )
        elif not _eager_is_deterministic(case, overload, device, report.trials[0].seed):
            warnings.append(
                f"nondeterministic (so is eager PyTorch on these inputs): {report.repeat_detail}"
            )
        else:
            return _fail(
                "nondeterministic",
                f"{report.repeat_detail}; PyTorch's {case.op} is deterministic on {device}",
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


def _alias_problem(
    op: str, kind: str, tr: TrialResult, exp: _Expected, returns_alias: bool
) -> str | None:
    """Why the outputs alias wrongly, or None."""
    if kind in ("inplace", "out"):
        what = "self" if kind == "inplace" else "out"
        if not tr.returned_targets or not all(tr.returned_targets):
            return (
                f"{op} must return its {what} tensor (the same object); "
                "the kernel returned another object"
            )
        if kind == "inplace" and not all(tr.target_ptr_same):
            return "the in-place kernel moved self to new storage instead of writing it"
        return None
    if returns_alias:
        return None
    eager_aliasing = {m["path"] for m in exp.eager_meta if m.get("aliases_input")}
    for m in tr.output_meta:
        if m.get("aliases_input") and m["path"] not in eager_aliasing:
            return (
                f"output{m['path']} shares storage with input {m['aliases_input']}; "
                f"{op} returns a new tensor"
            )
    return None


def _stride_problem(kind: str, tr: TrialResult, exp: _Expected) -> str | None:
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


def _compare_written(tr: TrialResult, exp: _Expected, cmp_kw: dict[str, Any]) -> corr.Comparison:
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


def generator_dependent_outputs(a: Any, b: Any) -> frozenset[str] | None:
    """The output paths that differ between eager runs ``a`` and ``b`` of a random op
    under two generator seeds; None when nothing comparable is left (every tensor output
    differs, or the second run failed or changed structure)."""
    if b is None:
        return None
    la, lb = corr.leaves(a), corr.leaves(b)
    if len(la) != len(lb):
        return None
    varying = frozenset(p for (p, x), (_, y) in zip(la, lb) if not corr.bitwise_equal(x, y))
    steady = [p for p, x in la if isinstance(x, torch.Tensor) and p not in varying]
    return varying if steady else None


def _expected_eager_again(
    case: Case, overload: torch._ops.OpOverload, device: str, seed: int
) -> Any:
    from opbench.suites.materialize import materialize

    args, kwargs = materialize(case, device, seed)
    try:
        with _seeded(overload, seed + 1, device):
            return _cpu(overload(*args, **kwargs))
    except Exception:
        return None


def verdict_to_dict(v: Verdict) -> dict[str, Any]:
    """A plain dict of a verdict (for JSON)."""
    return asdict(v)
