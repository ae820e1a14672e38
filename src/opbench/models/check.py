"""``check-model``: run real architectures eager and on a backend, and compare.

For each model: build it once (fixed seed), then run a forward pass, the loss, the
backward pass and one SGD step twice on identical copies: once in plain PyTorch, once
with the backend registered through :mod:`opbench.backends.registry`. Outputs, loss,
gradients and updated parameters are compared *after* the backend is removed (while
it is registered, even PyTorch's own comparison functions would run on it).

Coverage comes from two places: a dispatch-mode counter around the model (which ATen
overloads the model called, and how often) and the registry's per-op counters (which
of those the backend served and which fell back to PyTorch). The ``aten`` backend is
registered for exactly the overloads the eager run called, which exercises the whole
registration path; its outputs must be bit-identical.
"""

from __future__ import annotations

import copy
import logging
import math
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from opbench.backends import registry
from opbench.backends.loader import Backend, load_backend
from opbench.models.graph_timing import model_graph_times
from opbench.models.precision import autocast_dtype, forward_precision
from opbench.models.step_timing import alternating_step_ms
from opbench.models.zoo import MODEL_NAMES, ModelSpec, get_model

log = logging.getLogger(__name__)

__all__ = [
    "ModelCheck",
    "OpCoverage",
    "call_share",
    "check_model",
    "check_models",
    "cuda_graphs_usable",
    "OpCounter",
    "fastpath_off",
]


class OpCounter(TorchDispatchMode):
    """Counts the ATen overloads called (after autograd), by name (``add.Tensor``)."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        ns, _, name = func._schema.name.partition("::")
        if ns == "aten":
            self.counts[f"{name}.{func._overloadname or 'default'}"] += 1
        return func(*args, **(kwargs or {}))


@dataclass
class OpCoverage:
    op: str
    calls: int  # calls the model made with the backend enabled
    #: every dispatch of the op the backend took, the calls other kernels make inside
    #: theirs included (the aten backend's convolution allocates through
    #: ``empty.memory_format``: 102 served against the ResNet's own 6): more than ``calls``
    #: where that happens
    served: int
    fallback: int
    #: of ``served``, the calls the C++ gate launched itself (opbench.backends.native)
    native: int = 0
    #: why served calls stayed Python calls: launch replay's reasons for the signatures it
    #: refused (:func:`python_reasons`), "" where it refused none
    python_why: str = ""


def call_share(coverage: list[OpCoverage], counts: dict[str, int], steps: int = 1) -> float | None:
    """The share of ``steps`` steps' worth of the model's ATen calls that ``counts`` (op
    -> calls served, or launched from C++) covers, each op's count taken up to the
    model's own calls of it: a dispatch made inside another kernel is not one of the
    model's calls, and counted whole it put the aten backend's ResNet at 212%."""
    calls = sum(c.calls for c in coverage) * steps
    if not calls:
        return None
    return sum(min(counts.get(c.op, 0), c.calls * steps) for c in coverage) / calls


#: The call of one signature from which launch replay serves it: two recordings must agree
#: (gate_replay.h), so the third; a kernel whose first call compiles and launches
#: through ``kernel[grid]`` (the TMA matmuls) differs on that call, so the fourth.
REPLAY_FROM_CALL = "third or fourth"


def python_reasons(notes: list[dict[str, Any]], most: int = 3) -> str:
    """The reasons launch replay gave for the call signatures of one op it does not
    repeat (``registry.replay_notes()[op]``), each once, in the order first met, at most
    ``most`` of them, then how many signatures it is still recording (met fewer times
    than it needs, with no refusal): what a model's author reads to learn why those
    calls still enter Python."""
    seen: list[str] = []
    recording = 0
    for note in notes:
        why = str(note.get("why") or "")
        if note.get("ready"):
            continue
        if not why and note.get("given_up"):
            why = f"{note.get('recordings')} recordings of a signature that never agreed"
        if not why:
            recording += 1
        elif why not in seen:
            seen.append(why)
    more = f" (+{len(seen) - most} more)" if len(seen) > most else ""
    said = "; ".join(seen[:most]) + more
    if recording:
        # a checked step meets most signatures once or twice: they replay in later steps
        said += ("; " if said else "") + (
            f"{recording} signature{'s' if recording > 1 else ''} met too few times to "
            f"replay yet (from a signature's {REPLAY_FROM_CALL} call)"
        )
    return said


# Record fields of the same shape as run/store.TestResult's and instrument/timing's
# PairTiming, kept apart: one model's check, not a test's result or a timing.
@dataclass
class ModelCheck:
    """The verdict for one model on one backend."""

    model: str
    backend: str
    device: str
    compiled: bool
    ok: bool
    identical: bool
    error: str | None = None
    output_max_abs: float | None = None
    loss_abs: float | None = None
    grad_max_abs: float | None = None
    param_max_abs: float | None = None
    worst: str | None = None  # which tensor had the largest relative error
    ops_called: dict[str, int] = field(default_factory=dict)
    coverage: list[OpCoverage] = field(default_factory=list)
    seconds: float = 0.0
    #: median wall time of one training step (forward, loss, backward, SGD step, device
    #: synchronized), eager and on the backend taking turns (``time_steps``,
    #: :func:`alternating_step_ms`)
    eager_step_ms: float | None = None
    backend_step_ms: float | None = None
    #: ``cuda_graphs``: median replay time of the same step captured whole as a CUDA
    #: graph (host launch cost gone), or why that side could not be captured
    eager_graph_ms: float | None = None
    backend_graph_ms: float | None = None
    eager_graph_error: str | None = None
    backend_graph_error: str | None = None
    #: ``time_steps``: the share of a timed backend step's ATen calls launched from C++,
    #: read over the last block of timed steps. Launch replay serves a signature from
    #: its third or fourth call, so :attr:`native_call_share` (the checked step, every
    #: signature's first call) undercounts what a training loop runs.
    timed_native_share: float | None = None
    #: ``autocast``: the dtype the forward ran under (None: float32 throughout), and the
    #: dtype of the model's output on the backend, which shows autocast took effect
    autocast: str | None = None
    output_dtype: str | None = None

    @property
    def served_ops(self) -> list[str]:
        return [c.op for c in self.coverage if c.served]

    @property
    def served_call_share(self) -> float | None:
        """The share of the model's ATen calls (with the backend on) that it served, each
        op's served calls counted up to the model's own (:func:`call_share`)."""
        return call_share(self.coverage, {c.op: c.served for c in self.coverage})

    @property
    def native_call_share(self) -> float | None:
        """The share of the model's ATen calls launched from C++ without entering Python."""
        return call_share(self.coverage, {c.op: c.native for c in self.coverage})

    @property
    def step_speedup(self) -> float | None:
        """Eager step time over the backend's (> 1: the model trains faster on it)."""
        if self.eager_step_ms and self.backend_step_ms:
            return self.eager_step_ms / self.backend_step_ms
        return None

    @property
    def graph_speedup(self) -> float | None:
        """Eager graph replay time over the backend's: the kernels alone, no host."""
        if self.eager_graph_ms and self.backend_graph_ms:
            return self.eager_graph_ms / self.backend_graph_ms
        return None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["served_ops"] = self.served_ops
        d["served_call_share"] = self.served_call_share
        d["native_call_share"] = self.native_call_share
        d["step_speedup"] = self.step_speedup
        d["graph_speedup"] = self.graph_speedup
        return d


@dataclass
class _RunOut:
    output: torch.Tensor
    loss: torch.Tensor
    grads: dict[str, torch.Tensor]
    params: dict[str, torch.Tensor]
    ops: Counter


@contextmanager
def fastpath_off() -> Iterator[None]:
    mha = getattr(torch.backends, "mha", None)
    if mha is None or not hasattr(mha, "set_fastpath_enabled"):
        yield
        return
    old = mha.get_fastpath_enabled()
    mha.set_fastpath_enabled(False)
    try:
        yield
    finally:
        mha.set_fastpath_enabled(old)


def _run(
    spec: ModelSpec,
    model: torch.nn.Module,
    batch: dict[str, Any],
    *,
    compile_backend: str | None,
    count_ops: bool,
    autocast: str | None = None,
) -> _RunOut:
    model.train()
    fn: Any = model
    if compile_backend:
        fn = torch.compile(model, backend=compile_backend)
    counter = OpCounter() if count_ops else None
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    device = str(next(model.parameters()).device)
    with counter if counter is not None else nullcontext():
        with forward_precision(device, autocast):
            out = spec.call(fn, batch)
            loss = spec.loss(out, batch)
        loss.backward()
        opt.step()
    return _RunOut(
        output=spec.output(out).detach(),
        loss=loss.detach(),
        grads={n: p.grad.detach() for n, p in model.named_parameters() if p.grad is not None},
        params={n: p.detach() for n, p in model.named_parameters()},
        ops=counter.counts if counter is not None else Counter(),
    )


def _err(a: torch.Tensor, b: torch.Tensor) -> tuple[float, float, bool]:
    """(max abs error, max error relative to the reference's scale, bit-identical)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return math.inf, math.inf, False
    if a.numel() == 0:
        return 0.0, 0.0, True
    a64, b64 = a.double().cpu(), b.double().cpu()
    nan_a, nan_b = torch.isnan(a64), torch.isnan(b64)
    if not torch.equal(nan_a, nan_b):
        return math.inf, math.inf, False
    diff = (a64 - b64).abs().masked_fill(nan_a, 0.0)
    m = float(diff.max())
    scale = float(a64.abs().masked_fill(nan_a, 0.0).max()) or 1.0
    return m, m / scale, bool(torch.equal(a.cpu(), b.cpu()))


#: The backend may be off from a float64 run by this many times eager's own error.
EAGER_ERROR_FACTOR = 10.0


def _float64_run(spec: ModelSpec, base: torch.nn.Module, batch: dict[str, Any]) -> _RunOut | None:
    """The same step in float64, as the reference both runs are measured against: a
    gradient that is zero in exact arithmetic (a LayerNorm output's squared mean, a
    key bias under softmax) is rounding noise in float32, and two float32 runs differ
    there by 100% of its scale while both are right. None where a model cannot run in
    float64 (the comparison then falls back to eager against the backend)."""
    try:
        model = copy.deepcopy(base).double()
        batch64 = {
            k: v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v
            for k, v in batch.items()
        }
        return _run(spec, model, batch64, compile_backend=None, count_ops=False)
    except Exception as e:  # an op without float64 support on this device
        log.debug("float64 reference run of %s failed: %s", spec.name, e)
        return None


def _pairs(
    ref: _RunOut, cand: _RunOut, ref64: _RunOut | None
) -> list[tuple[str, torch.Tensor, torch.Tensor, torch.Tensor | None]]:
    """(label, eager, backend, float64 or None) for everything compared."""
    out = [
        ("output", ref.output, cand.output, ref64.output if ref64 else None),
        ("loss", ref.loss, cand.loss, ref64.loss if ref64 else None),
    ]
    for n in ref.grads:
        r64 = ref64.grads.get(n) if ref64 else None
        out.append((f"grad:{n}", ref.grads[n], cand.grads.get(n, torch.empty(0)), r64))
    for n in ref.params:
        r64 = ref64.params.get(n) if ref64 else None
        out.append((f"param:{n}", ref.params[n], cand.params[n], r64))
    return out


def _err_against_float64(
    eager: torch.Tensor, cand: torch.Tensor, ref64: torch.Tensor, rtol: float
) -> float:
    """The backend's error against float64 over what it may be: ``EAGER_ERROR_FACTOR``
    times eager's error plus ``rtol`` of the float64 tensor's scale (<= 1 passes)."""
    if cand.shape != ref64.shape or cand.dtype != eager.dtype:
        return math.inf
    r = ref64.double().cpu()
    c, e = cand.double().cpu(), eager.double().cpu()
    if not torch.equal(torch.isnan(c), torch.isnan(e)):
        return math.inf
    finite = ~torch.isnan(r)
    cand_err = float((c - r).abs()[finite].max()) if finite.any() else 0.0
    eager_err = float((e - r).abs()[finite].max()) if finite.any() else 0.0
    scale = float(r.abs()[finite].max()) if finite.any() else 0.0
    allowed = EAGER_ERROR_FACTOR * eager_err + rtol * scale
    if allowed == 0.0:
        return 0.0 if cand_err == 0.0 else math.inf
    return cand_err / allowed


def check_model(
    name: str,
    backend: Backend | str = "aten",
    device: str = "cpu",
    *,
    compile: bool = False,
    compile_backend: str = "inductor",
    seed: int = 0,
    scale: int = 1,
    rtol: float = 1e-4,
    time_steps: int = 0,
    only_ops: list[str] | None = None,
    allow_tf32: bool = False,
    policy: Any = None,
    cuda_graphs: bool = False,
    native: bool = True,
    autocast: str | None = None,
) -> ModelCheck:
    """Run ``name`` eager and on ``backend``; compare outputs, loss, gradients, step.

    ``rtol`` bounds each compared tensor's max error relative to its largest value (a
    loose, scale-aware bound: kernels may reorder float sums). ``time_steps`` > 0 also
    times that many training steps eager and on the backend, taking turns
    (:func:`alternating_step_ms`), on fresh copies of the model, after the comparison.
    ``only_ops`` registers just those of the backend's overloads (to find which kernel
    breaks a model). Float32 matmuls and
    convolutions run in IEEE float32 for eager and the backend alike (TF32 only with
    ``allow_tf32``), the settings ``opbench run`` pins, restored afterwards. ``policy``:
    serve only where a judged run found the kernels faster
    (:mod:`opbench.backends.serve_policy`). ``cuda_graphs`` (with ``time_steps``, on
    CUDA) also times the step captured whole as a CUDA graph on both sides
    (:mod:`opbench.models.graph_timing`); a side that cannot be captured gets a
    ``*_graph_error`` instead of a time. ``native``: the C++ gate in front of the
    registered ops (:mod:`opbench.backends.native`); False measures the Python path alone.
    ``autocast`` (``bf16``, ``f16``): every step's forward and loss under
    ``torch.autocast``, as mixed-precision training runs them; the float64 reference
    without (:mod:`opbench.models.precision`). ValueError for another name.
    """
    from opbench.instrument.settings import pinned

    autocast_dtype(autocast)  # a bad name fails before any model is built
    if cuda_graphs:
        cuda_graphs_usable(device, time_steps)
    with pinned(allow_tf32=allow_tf32):
        return _check_model(name, backend, device, compile, compile_backend, seed, scale, rtol,
                            time_steps, only_ops, policy, cuda_graphs, native, autocast)  # fmt: skip


def cuda_graphs_usable(device: str, time_steps: int) -> None:
    """Raise ValueError unless graph timing can run: CUDA graphs need a CUDA device
    that torch sees, and graph replays are timed only alongside ``time_steps``."""
    if not str(device).startswith("cuda"):
        raise ValueError(f"CUDA graphs need a CUDA device, not device {device!r}")
    if not torch.cuda.is_available():
        raise ValueError("CUDA graphs need a CUDA device, and torch sees none")
    if time_steps <= 0:
        raise ValueError("CUDA graph timing replays the timed steps: give time_steps > 0")


def _check_model(
    name: str, backend: Backend | str, device: str, compile: bool, compile_backend: str,
    seed: int, scale: int, rtol: float, time_steps: int, only_ops: list[str] | None,
    policy: Any = None, cuda_graphs: bool = False, native: bool = True,
    autocast: str | None = None,
) -> ModelCheck:  # fmt: skip
    started = time.perf_counter()
    spec = get_model(name, scale)
    be = backend if isinstance(backend, Backend) else load_backend(backend, device)
    result = ModelCheck(name, be.name, device, compile, ok=False, identical=False,
                        autocast=autocast)  # fmt: skip
    try:
        torch.manual_seed(seed)
        base = spec.build().to(device)
        g = torch.Generator().manual_seed(seed)
        batch = {
            k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in spec.inputs(g).items()
        }
        eager_model, cand_model = copy.deepcopy(base), copy.deepcopy(base)
        cb = compile_backend if compile else None
        with fastpath_off():
            ref = _run(spec, eager_model, batch, compile_backend=cb, count_ops=not compile,
                       autocast=autocast)  # fmt: skip
            ref64 = _float64_run(spec, base, batch)
            if compile:
                torch._dynamo.reset()
            ops = set(ref.ops) if be.name == "aten" else None
            if be.name == "aten" and compile:
                ops = None  # nothing to register without an eager op list
            if only_ops is not None:
                ops = set(only_ops) if ops is None else ops & set(only_ops)
            registry.reset_counts()
            with registry.backend(be, device, ops=ops, policy=policy, native=native):
                cand = _run(spec, cand_model, batch, compile_backend=cb, count_ops=not compile,
                            autocast=autocast)  # fmt: skip
                counts = registry.call_counts()
                notes = registry.replay_notes()
            if compile:
                torch._dynamo.reset()
    except Exception as e:
        result.error = f"{type(e).__name__}: {e}"
        result.seconds = time.perf_counter() - started
        log.debug("model %s failed", name, exc_info=True)
        return result

    worst_rel, worst, identical = 0.0, None, True
    maxes = {"output": 0.0, "loss": 0.0, "grad": 0.0, "param": 0.0}
    for label, a, b, r64 in _pairs(ref, cand, ref64):
        m, rel, same = _err(a, b)
        identical &= same
        kind = label.split(":", 1)[0]
        maxes[kind] = max(maxes[kind], m)
        if r64 is not None and not same:
            rel = _err_against_float64(a, b, r64, rtol) * rtol
        if rel > worst_rel or (math.isinf(rel) and worst is None):
            worst_rel, worst = rel, label
    result.output_dtype = str(cand.output.dtype)
    result.output_max_abs = maxes["output"]
    result.loss_abs = maxes["loss"]
    result.grad_max_abs = maxes["grad"]
    result.param_max_abs = maxes["param"]
    result.worst = worst
    result.identical = identical
    result.ok = identical or worst_rel <= rtol
    if not result.ok:
        how = (
            f"beyond eager's own error against float64 (x{EAGER_ERROR_FACTOR:g}) plus rtol "
            f"{rtol:g} of its scale"
            if ref64 is not None
            else f"of its scale (rtol {rtol:g})"
        )
        result.error = f"mismatch: {worst} off by {worst_rel:.3g} {how}"
    result.ops_called = dict(sorted(cand.ops.items()))
    names = set(cand.ops) | set(counts)
    result.coverage = [
        OpCoverage(
            op,
            cand.ops.get(op, 0),
            counts.get(op, {}).get("served", 0),
            counts.get(op, {}).get("fallback", 0),
            counts.get(op, {}).get("native", 0),
            python_reasons(notes.get(op, [])),
        )
        for op in sorted(names)
        if cand.ops.get(op, 0)
        or counts.get(op, {}).get("served", 0)
        or counts.get(op, {}).get("fallback", 0)
    ]
    if time_steps > 0 and not compile:
        try:
            with fastpath_off():
                timed = alternating_step_ms(
                    spec, base, batch, device, time_steps,
                    lambda: registry.backend(be, device, ops=ops, policy=policy, native=native),
                    autocast=autocast,
                )  # fmt: skip
                result.eager_step_ms, result.backend_step_ms = timed.eager_ms, timed.backend_ms
                result.timed_native_share = call_share(
                    result.coverage,
                    {op: d.get("native", 0) for op, d in timed.timed_counts.items()},
                    timed.timed_steps,
                )
        except Exception as e:  # the comparison stands; say why there is no time
            result.error = f"timing failed: {type(e).__name__}: {e}"
        if cuda_graphs:
            _time_graphs(result, spec, base, batch, device, time_steps,
                         lambda: registry.backend(be, device, ops=ops, policy=policy, native=native),
                         autocast)  # fmt: skip
    result.seconds = time.perf_counter() - started
    return result


def _time_graphs(result: ModelCheck, spec: ModelSpec, base: torch.nn.Module,
                 batch: dict[str, Any], device: str, steps: int, enable_backend: Any,
                 autocast: str | None = None) -> None:  # fmt: skip
    """Fill ``result``'s graph fields: a time, or why that side has none."""
    with fastpath_off():
        eager, cand = model_graph_times(spec, base, batch, device, steps, enable_backend,
                                        autocast)  # fmt: skip
    result.eager_graph_ms, result.eager_graph_error = eager.ms, eager.error
    result.backend_graph_ms, result.backend_graph_error = cand.ms, cand.error


def check_models(
    names: list[str] | None = None,
    backend: str | Backend = "aten",
    device: str = "cpu",
    *,
    kernel_version: str | None = None,
    **kwargs: Any,
) -> list[ModelCheck]:
    """:func:`check_model` for several models, loading the backend once."""
    be = (
        backend
        if isinstance(backend, Backend)
        else load_backend(backend, device, kernel_version=kernel_version)
    )
    return [check_model(n, be, device, **kwargs) for n in (names or list(MODEL_NAMES))]
