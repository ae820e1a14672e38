"""What the harness expects of a test, computed before any candidate runs.

Runs in the HARNESS. For each seed of a case: the inputs as the harness builds them
(storage spans, digests of the span and of the elements, object layouts), eager
PyTorch's outputs and a float64 reference on upcast inputs, the values of written
arguments, and which trivial answers would pass (:class:`Expected`). :func:`plan_trials`
picks the seeds the worker must run (re-drawing inputs that a trivial answer would
pass) from these, and :func:`opbench.judge.evaluate.judge_report` judges the worker's
report against the same objects, so each is computed once.
"""

from __future__ import annotations

import contextlib
import secrets
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from opbench.instrument import tensors
from opbench.instrument.records import TrialPlan
from opbench.judge import correctness as corr
from opbench.judge import guard as guard_mod
from opbench.spec.call import (
    UNINITIALIZED_OPS,
    arg_names,
    is_written,
    targets,
    walk_inputs,
    written_args,
)
from opbench.spec.ops import get_overload
from opbench.suites.case import Case, derive_seed

if TYPE_CHECKING:
    from opbench.spec.judge_options import JudgeOptions

__all__ = [
    "CONSTANT_OPS",
    "REDRAWS",
    "Expectations",
    "Expected",
    "NotRunnableHere",
    "eager_again",
    "eager_is_deterministic",
    "expect",
    "generator_dependent_outputs",
    "is_random",
    "plan_trials",
    "storages_of",
    "trial_seeds",
    "trivial_for",
    "undefined_outputs",
    "with_aliases",
]


#: Extra seeds the harness tries when the first trials of an ``args`` case look trivial.
REDRAWS = 3

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
        names = arg_names(overload)
        i = names.index("reduction")
        reduction = kwargs.get("reduction", args[i] if i < len(args) else None)
        if reduction == 0:
            paths = paths | {"[1]"}
    return paths


# --------------------------------------------------------------------------- seeds


def trial_seeds(seed: int, trials: int) -> list[int]:
    """The case's seed, then ``trials - 1`` derived ones."""
    return [derive_seed(seed, i) for i in range(max(1, trials))]


@contextlib.contextmanager
def seeded(overload: torch._ops.OpOverload, seed: int, device: str) -> Any:
    """For ops that draw from the global generator: hold the generator lock (the harness
    judges from several threads, and OpInfo samples are drawn from the same generator)
    and seed it. Other ops leave the generator alone: reseeding it here would change the
    samples another thread is drawing."""
    if not is_random(overload):
        yield
        return
    from opbench.suites.opinfo import RNG_LOCK, seed_generators

    with RNG_LOCK:
        seed_generators(seed, device)
        yield


def _sync(device: str) -> None:
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


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


def host_copy(t: torch.Tensor) -> torch.Tensor:
    """A CPU tensor of ``t``'s values that shares nothing with it: a GPU tensor's copy to
    the host is new already (cloning it again cost a second host copy of every output)."""
    t = t.detach()
    return t.cpu() if t.device.type != "cpu" else t.clone()


def cpu_copy(obj: Any) -> Any:
    if isinstance(obj, (tuple, list)):
        seq = [cpu_copy(v) for v in obj]
        return seq if isinstance(obj, list) else tuple(seq)
    if isinstance(obj, torch.Tensor):
        return host_copy(obj)
    return obj


def is_random(overload: torch._ops.OpOverload) -> bool:
    return torch.Tag.nondeterministic_seeded in overload.tags


@dataclass
class Expected:
    """The harness's own view of one seed: eager's and the float64 reference's outputs,
    and the inputs as it built them (storage spans or digests, for the mutation diff)."""

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
    input_spans: dict[str, torch.Tensor] = field(default_factory=dict)
    input_digests: dict[str, str] = field(default_factory=dict)
    element_digests: dict[str, str] = field(default_factory=dict)
    storages: dict[int, str] = field(default_factory=dict)
    #: the trivial answers that pass, once computed (planning and the judgement share it)
    trivial: list[str] | None = None
    #: where the harness ran eager and the reference: on a GPU run the comparisons run
    #: there too (:func:`opbench.judge.evaluate.compare_kwargs`)
    device: str = "cpu"


#: What the harness computed for each seed of a plan, kept for the judgement.
Expectations = dict[int, Expected]


class NotRunnableHere(Exception):
    pass


def _written_values(
    overload: torch._ops.OpOverload, args: list[Any], kwargs: dict[str, Any]
) -> dict[str, torch.Tensor]:
    """CPU copies of the written, non-returned tensor arguments after a call."""
    written = written_args(overload)
    target_ids = {id(t) for t in targets(overload, args, kwargs)}
    return {
        p: host_copy(t)
        for p, top, t in walk_inputs(args, kwargs)
        if id(t) not in target_ids and is_written(top, overload, written)
    }


def with_aliases(metas: list[dict[str, Any]], storages: dict[int, str]) -> list[dict[str, Any]]:
    """``metas`` with ``aliases_input`` set where an output shares an input's storage."""
    for m in metas:
        ptr = m.get("storage_ptr")
        if m.get("kind") == "tensor" and ptr:
            m["aliases_input"] = storages.get(int(ptr))
    return metas


def storages_of(metas: dict[str, dict[str, Any]]) -> dict[int, str]:
    out: dict[int, str] = {}
    for p, m in metas.items():
        ptr = m.get("storage_ptr")
        if ptr:
            out.setdefault(int(ptr), p)
    return out


def expect(case: Case, overload: torch._ops.OpOverload, device: str, seed: int) -> Expected:
    from opbench.instrument.candidate import MAX_INPUT_ELEMENTS_SENT
    from opbench.suites.inputs import NotRunnable, copy_inputs
    from opbench.suites.materialize import materialize

    try:
        args, kwargs = materialize(case, device, seed)
    except NotRunnable as e:
        raise NotRunnableHere(f"inputs not runnable: {e.reason}") from None
    inputs = walk_inputs(args, kwargs)
    metas = {p: tensors.meta(t) for p, _, t in inputs}
    storages = storages_of(metas)
    spans: dict[str, torch.Tensor] = {}
    digests: dict[str, str] = {}
    elements: dict[str, str] = {}
    for p, _, t in inputs:
        snap = tensors.snapshot(t)
        digests[p] = tensors.digest(snap)
        elements[p] = tensors.elements_digest(t)
        if snap.numel() <= MAX_INPUT_ELEMENTS_SENT:
            spans[p] = snap
    first = host_copy(inputs[0][2]) if inputs else None
    max_in = max((t.numel() for _, _, t in inputs), default=0)
    # The reference's inputs are copied before eager runs (eager may write into its own):
    # the same values as drawing them again, which took over a third of the harness's
    # planning on the traces suite (large activations drawn on one CPU thread).
    ref_inputs = copy_inputs(args, kwargs)
    try:
        with seeded(overload, seed, device):
            raw = overload(*args, **kwargs)
        _sync(device)
    except Exception as e:
        raise NotRunnableHere(
            f"eager PyTorch rejects these inputs: {type(e).__name__}: {str(e)[:300]}"
        ) from None
    for _, leaf in corr.leaves(raw):
        if isinstance(leaf, torch.Tensor) and leaf.layout != torch.strided:
            raise NotRunnableHere(
                f"eager returns a {leaf.layout} tensor; only strided outputs are judged"
            )
    eager_meta = with_aliases(tensors.output_meta(raw), storages)
    eager = cpu_copy(raw)
    eager_written = _written_values(overload, args, kwargs)
    del raw
    ref = None
    ref_written: dict[str, Any] = {}
    note = None
    try:
        a64, k64 = ref_inputs
        a64 = [_upcast(a) for a in a64]
        k64 = {k: _upcast(v) for k, v in k64.items()}
        with seeded(overload, seed, device):
            ref = cpu_copy(overload(*a64, **k64))
        ref_written = _written_values(overload, a64, k64)
    except Exception as e:
        note = f"no float64 reference ({type(e).__name__}: {str(e)[:200]}); eager is the reference"
    return Expected(
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
        spans,
        digests,
        elements,
        storages,
        device=str(device),
    )


def trivial_for(
    case: Case, overload: torch._ops.OpOverload, exp: Expected, options: JudgeOptions
) -> list[str]:
    """The trivial answers (zeros, a constant, an input copy) that would pass this seed's
    check (computed once per seed: planning and the judgement both ask)."""
    if exp.trivial is not None:
        return exp.trivial
    base = overload._schema.name.removeprefix("aten::")
    exp.trivial = list(
        corr.trivial_answers(
            exp.eager,
            exp.ref,
            exp.first_input,
            op=case.op,
            allow_input_copy=not guard_mod.is_copy_like(case.op),
            allow_constant=base.rstrip("_") not in CONSTANT_OPS,
            max_in_numel=exp.max_in_numel,
            rtol_scale=options.rtol_scale,
            atol_scale=options.atol_scale,
        )
    )
    return exp.trivial


def _is_trivial(
    case: Case, overload: torch._ops.OpOverload, exp: Expected, options: JudgeOptions
) -> bool:
    """Would a trivial answer pass this seed's check?"""
    return bool(trivial_for(case, overload, exp, options))


def plan_trials(case: Case, device: str, options: JudgeOptions) -> tuple[TrialPlan, Expectations]:
    """The seeds the worker must run, and the harness's expectations for each.

    Computed here, before any candidate runs, so nothing the candidate does can steer
    which inputs it is tested on. When every trial of an ``args`` or ``opinfo`` case
    would accept a trivial answer, up to :data:`REDRAWS` new seeds are tried (trace
    cases: new values from the same rules; OpInfo cases: the sample with NaN, Inf and
    zeros injected) and the first that does not is added as a re-drawn trial. Seeds
    whose references cannot be computed here are left for the judgement to report.
    """
    overload = get_overload(case.op)
    seeds = trial_seeds(case.seed, options.trials)
    plan = TrialPlan(
        seeds=list(seeds),
        redraw=[False] * len(seeds),
        repeat_after=secrets.randbelow(len(seeds)),  # the worker cannot know it in advance
    )
    expectations: Expectations = {}
    for s in seeds:
        try:
            expectations[s] = expect(case, overload, device, s)
        except NotRunnableHere:
            return plan, expectations
    if not (options.check_weak and case.source in ("args", "opinfo")):
        return plan, expectations
    base = overload._schema.name.removeprefix("aten::")
    if base in UNINITIALIZED_OPS or is_random(overload):
        return plan, expectations
    if not all(_is_trivial(case, overload, expectations[s], options) for s in seeds):
        return plan, expectations
    from opbench.suites.materialize import special_seeds

    candidates = (
        [derive_seed(case.seed, 1000 + j) for j in range(REDRAWS)]
        if case.source == "args"
        else special_seeds(case)
    )
    for s in candidates:
        plan.redraw_seeds_tried.append(s)
        try:
            exp = expect(case, overload, device, s)
        except NotRunnableHere:
            continue
        if not _is_trivial(case, overload, exp, options):
            plan.seeds.append(s)
            plan.redraw.append(True)
            expectations[s] = exp
            break
    return plan, expectations


def eager_is_deterministic(
    case: Case, overload: torch._ops.OpOverload, device: str, seed: int
) -> bool:
    """Whether eager PyTorch gives bitwise-identical outputs twice on these inputs."""
    from opbench.suites.materialize import materialize

    outs = []
    for _ in range(2):
        args, kwargs = materialize(case, device, seed)
        with seeded(overload, seed, device):
            outs.append(cpu_copy(overload(*args, **kwargs)))
    return corr.bitwise_equal(outs[0], outs[1])


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


def eager_again(case: Case, overload: torch._ops.OpOverload, device: str, seed: int) -> Any:
    from opbench.suites.materialize import materialize

    args, kwargs = materialize(case, device, seed)
    try:
        with seeded(overload, seed + 1, device):
            return cpu_copy(overload(*args, **kwargs))
    except Exception:
        return None
