"""Running one program candidate, in the WORKER: the only place ``ModelNew`` is imported.

Called by :mod:`opbench.run.worker` for a ``program`` request, in a worker that imports
nothing else of the candidate's and serves this one request (one candidate per process,
so nothing it does reaches another problem's verdict). The harness sends the problem's
source, the candidate's source (or names a backend), the reference model's
``state_dict`` and the seeds; both files are written into the worker's private ``/tmp``
and imported from there, so the sandbox needs no view of the user's folders.

Order matters and is the point of this module: the problem's ``Model`` is built, loaded
with the harness's weights and, with ``compile_baseline``, compiled and warmed up, and the
process fingerprint is taken (:mod:`opbench.instrument.integrity`), all *before* any
candidate code is imported. Then ``ModelNew`` is built with the same constructor
arguments and given the same weights through ``load_state_dict(strict=True)``: weights
are matched by name, never by the order of random draws, and keys that differ are a
``state_dict`` mismatch.

It decides nothing. It sends back plain data: per trial the candidate's outputs copied
to the CPU, their layout facts and a digest of the inputs it built; the timing of
reference against candidate (:func:`opbench.instrument.timing.time_pair`); and what changed
in the process. The harness judges against references it computed itself.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from opbench.instrument import tensors
from opbench.instrument import timing as timing_mod
from opbench.instrument.integrity import Fingerprint
from opbench.instrument.neighbours import NeighbourWatch
from opbench.instrument.timed import DrawLookup, keeping_timed, timed_outputs
from opbench.programs import compile_cache
from opbench.programs.inputs import build_model, call_sized, make_inputs, tensors_of

__all__ = ["run_program"]

_perf = time.perf_counter


def _short_tb(e: BaseException) -> str:
    return "".join(traceback.format_exception(type(e), e, e.__traceback__)[-6:])[-3000:]


def _import_source(source: str, filename: str, workdir: Path, name: str) -> Any:
    """Write ``source`` to ``workdir/filename`` and import it as module ``name`` (a real
    file, so ``inspect.getsource``, Triton's ``@jit`` and C++ extensions work)."""
    path = workdir / filename
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {filename}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _no_grad(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` called without autograd (as KernelBench evaluates); both sides get it."""

    def call(*args: Any) -> Any:
        with torch.no_grad():
            return fn(*args)

    return call


def _weights(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A private copy of the weights (a candidate's ``load_state_dict`` may keep what
    it is given; the reference's own tensors must stay out of its reach)."""
    return {k: v.clone() for k, v in state.items()}


class _Failed(Exception):
    """Ends the request early with ``fields`` merged into the report."""

    def __init__(self, **fields: Any) -> None:
        super().__init__(fields.get("candidate_error", ""))
        self.fields = fields


def _candidate(
    req: dict[str, Any],
    problem: Any,
    init: list[Any],
    state: dict[str, torch.Tensor],
    device: str,
    workdir: Path,
) -> Callable[..., Any]:
    """The callable judged: ``ModelNew`` from the candidate file, or the problem's own
    ``Model`` with a backend's kernels registered through ``torch.library`` around each
    call (so the reference side, timed in the same process, never runs them)."""
    seed = int(req["init_seed"])
    cand_src = req.get("candidate")
    if cand_src is not None:
        try:
            mod = _import_source(
                cand_src["source"], cand_src["filename"], workdir, "opbench_candidate"
            )
        except Exception as e:
            raise _Failed(
                candidate_error=f"importing the candidate failed: {type(e).__name__}: {e}",
                tb=_short_tb(e),
            ) from None
        cls = getattr(mod, "ModelNew", None)
        if cls is None:
            raise _Failed(candidate_error="the candidate file defines no class ModelNew")
        try:
            model = build_model(cls, init, seed, "cpu")
        except NotImplementedError as e:
            raise _Failed(not_implemented=str(e) or "NotImplementedError") from None
        except Exception as e:
            raise _Failed(
                candidate_error=f"ModelNew(*get_init_inputs()) failed: {type(e).__name__}: {e}",
                tb=_short_tb(e),
            ) from None
        try:
            model.load_state_dict(_weights(state), strict=True)
        except Exception as e:
            raise _Failed(state_dict_error=f"{type(e).__name__}: {e}"[:3000]) from None
        try:
            model = model.to(device)
        except Exception as e:
            raise _Failed(
                candidate_error=f"ModelNew.to({device!r}) failed: {type(e).__name__}: {e}",
                tb=_short_tb(e),
            ) from None
        return _no_grad(model)

    # a backend judged on the whole program: the problem's Model, same weights
    model = build_model(problem.Model, init, seed, "cpu")
    model.load_state_dict(_weights(state), strict=True)
    model = model.to(device)
    spec = req.get("backend") or "aten"
    if spec == "aten":
        return _no_grad(model)
    from opbench.backends import registry
    from opbench.backends.loader import load_backend

    # only the overloads this model reaches are registered around each call: the whole
    # Triton backend (153 overloads) costs ~8 ms per enable/disable on a 2-core CPU
    called = _overloads_called(model, problem, int(req["seeds"][0]), req.get("size"), device)
    model.load_state_dict(_weights(state), strict=True)  # undo what that forward updated

    try:
        backend = load_backend(spec, device, kernel_version=req.get("kernel_version"))
    except Exception as e:
        raise _Failed(
            candidate_error=f"loading backend {spec} failed: {type(e).__name__}: {e}",
            tb=_short_tb(e),
        ) from None

    def call(*args: Any) -> Any:
        registry.enable(backend, device, ops=called)
        try:
            with torch.no_grad():
                return model(*args)
        finally:
            registry.disable(backend)

    return call


def _overloads_called(
    model: Any, problem: Any, seed: int, size: str | None, device: str
) -> list[str]:
    """The ATen overloads (``relu.default``) one forward of ``model`` reaches on the
    device's dispatch key, recorded before any backend code is imported."""
    from torch.utils._python_dispatch import TorchDispatchMode

    seen: set[str] = set()

    class Seen(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
            schema = func._schema
            if schema.name.startswith("aten::"):
                seen.add(f"{schema.name.removeprefix('aten::')}.{func._overloadname}")
            return func(*args, **(kwargs or {}))

    args = make_inputs(problem, seed, size, device)
    with torch.no_grad(), Seen():
        model(*args)
    return sorted(seen)


def _trial(
    call: Callable[..., Any], problem: Any, seed: int, size: str | None, device: str
) -> dict[str, Any]:
    """One trial: fresh inputs from ``seed``, one call, the raw facts (never raises)."""
    tr: dict[str, Any] = {"seed": seed, "status": "ok"}
    args = make_inputs(problem, seed, size, device)
    tr["input_digests"] = [tensors.elements_digest(t) for t in tensors_of(args)]
    t0 = _perf()
    try:
        result = call(*args)
        tensors.sync(device)
        tr["elapsed_s"] = _perf() - t0
        tr["outputs"] = tensors.cpu_outputs(result)
        tr["output_meta"] = tensors.output_meta(result)
    except NotImplementedError as e:
        tr["status"], tr["message"] = "not_implemented", str(e) or "NotImplementedError"
    except Exception as e:
        tr["status"] = "error"
        tr["message"] = f"{type(e).__name__}: {e}"[:2000]
        tr["traceback"] = _short_tb(e)
    return tr


def run_program(req: dict[str, Any], device: str) -> dict[str, Any]:
    """Serve one ``program`` request (see the module docstring); returns plain data."""
    out: dict[str, Any] = {"type": "program_result", "problem_id": req.get("problem_id")}
    started = _perf()
    workdir = Path(tempfile.mkdtemp(prefix="opbench-program-"))
    size = req.get("size")
    seeds = [int(s) for s in req["seeds"]]
    # trusted code first: the reference model, its weights, its compiled twin
    problem = _import_source(
        req["problem"]["source"], req["problem"]["filename"], workdir, "opbench_problem"
    )
    init = list(call_sized(problem.get_init_inputs, size))
    state = req["state_dict"]
    reference = build_model(problem.Model, init, int(req["init_seed"]), "cpu")
    reference.load_state_dict(_weights(state), strict=True)
    reference = reference.to(device)
    ref_call = _no_grad(reference)
    compiled_call = None
    if req.get("perf") and req.get("compile_baseline"):
        try:
            if req.get("compile_cache"):  # the harness's warm, read-only cache entry
                out["compile_cache_files"] = compile_cache.restore(req["compile_cache"])
            t0 = _perf()
            compiled_call = _no_grad(torch.compile(reference))
            compiled_call(*make_inputs(problem, seeds[0], size, device))  # compile now
            tensors.sync(device)
            out["compile_s"] = round(_perf() - t0, 2)
        except Exception as e:
            compiled_call = None
            out["compile_error"] = f"{type(e).__name__}: {e}"[:2000]
    fingerprint = Fingerprint()
    # threads and processes alive now are the worker's and the reference's (torch.compile's
    # workers included); what appears later is the candidate's (instrument/neighbours.py)
    watch = NeighbourWatch()
    # then the candidate
    try:
        call = _candidate(req, problem, init, state, device, workdir)
    except _Failed as f:
        out.update(f.fields)
        out["tamper"] = fingerprint.changes()
        watch.look()
        out["neighbours"] = watch.readings()
        out["elapsed_s"] = _perf() - started
        return out
    trials = []
    for seed in seeds:
        tr = _trial(call, problem, seed, size, device)
        watch.look()
        trials.append(tr)
        if tr["status"] != "ok":
            break
    out["trials"] = trials
    out["tamper"] = fingerprint.changes()
    ok = all(t["status"] == "ok" for t in trials) and not out["tamper"]
    if req.get("perf") and ok:
        options = timing_mod.TimingOptions(**(req.get("timing_options") or {}))

        def make_args(seed: int = seeds[0]) -> tuple[list[Any], dict[str, Any]]:
            return make_inputs(problem, seed, size, device), {}

        # Two timed calls' outputs go back to the harness, each with the input draw it
        # held (the first or the second trial's seed, chosen per call at random), and are
        # compared with that seed's reference: a candidate that computes for the
        # correctness trials and cuts corners once timed fails, and so does one that
        # returns a remembered answer. The candidate cannot tell this wrapper's calls
        # from the trials'.
        second = (lambda: make_args(seeds[1])) if len(seeds) > 1 else None
        last: list[Any] = []
        draws_seen = DrawLookup()
        timed = keeping_timed(call, last, draws_seen.draw_of, draws_seen.phase_of)
        for key, ref in (("timing", ref_call), ("timing_compile", compiled_call)):
            if ref is None:
                continue
            try:
                got = timing_mod.time_pair(
                    # the same wrapper on the reference: its cost is never the candidate's
                    keeping_timed(ref, [], draws_seen.draw_of, draws_seen.phase_of),
                    timed,
                    make_args,
                    device,
                    options,
                    alternate_args=second,
                    inputs_ready=draws_seen.ready,
                    reference_window=watch.reference,
                    look=watch.look,
                )
                out[key] = got.to_dict()
            except Exception as e:
                out[f"{key}_error"] = f"{type(e).__name__}: {e}"[:2000]
        # the kept outputs beyond the last two go along while the message has room
        from opbench.instrument.timed import output_bytes
        from opbench.run.protocol import MAX_MESSAGE_BYTES

        room = MAX_MESSAGE_BYTES - sum(output_bytes(t.get("outputs")) for t in trials)
        out.update(timed_outputs(last, device, room=room))
        out["timing_tamper"] = fingerprint.changes()
    watch.look()
    out["neighbours"] = watch.readings()
    with contextlib.suppress(Exception):
        out["elapsed_s"] = _perf() - started
    return out
