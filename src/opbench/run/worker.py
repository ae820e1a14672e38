"""The worker process: the only place where candidate kernels are imported and run.

Started by :mod:`opbench.run.pool` as ``python -m opbench.run.worker`` (possibly inside
a sandbox, or forked from a warm template). It reads its configuration, warms up and
says ``ready``; then the harness names the one isolation unit it judges
(:mod:`opbench.backends.units`: the kernel folders of one operator, or the whole
backend for ``aten`` and ``module:``), and only then is candidate code imported, under
the call observer and after the process's fingerprint is taken
(:mod:`opbench.instrument.integrity`). It then serves one case at a time: runs the
candidate on the seeds the harness planned (:func:`opbench.instrument.candidate.run_candidate`)
and, when asked, the interleaved timing of reference against candidate, and writes
plain data back on a private copy of stdout. It decides nothing: the harness does.

File descriptor 1 is pointed at stderr before any candidate code is imported, so a
kernel that prints cannot corrupt the protocol.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import traceback
from typing import Any

from opbench.run.warm_up import opinfo_database as warm_opinfo_database

#: Every module :func:`main` imports before candidate code: the fork server's template
#: imports them all (:func:`preload`), so a fork pays nothing for them. Each one a fork
#: had to import itself cost it the import and, where Python writes no bytecode
#: (``PYTHONDONTWRITEBYTECODE``, as on the CI machines), a compile from source (~30 ms
#: for the nine modules the template lacked, and a fresh process fingerprint: ~12 ms;
#: 2026-11-27, the Scorer's CPU benchmark). ``tests/run/test_worker_imports.py`` holds
#: this list to what :func:`main` imports.
WORKER_MODULES = (
    "torch",
    "opbench.backends.directory",
    "opbench.backends.loader",
    "opbench.instrument.candidate",
    "opbench.instrument.integrity",
    "opbench.instrument.interpreter_rounding",
    "opbench.instrument.native_calls",
    "opbench.instrument.neighbours",
    "opbench.instrument.observer",
    "opbench.instrument.records",
    "opbench.instrument.settings",
    "opbench.instrument.tensors",
    "opbench.instrument.timing",
    "opbench.run.bytecode_cache",
    "opbench.run.protocol",
    "opbench.spec.judge_options",
    "opbench.spec.ops",
    "opbench.spec.reference",
    "opbench.spec.variants",
    "opbench.suites.case",
    "opbench.suites.draw_pool",
    "opbench.suites.materialize",
)

#: Set by the fork server's template after its own warm-up, before it forks workers.
WARMED_BY_TEMPLATE = False
#: The template's process fingerprint, taken after its warm-up (see Fingerprint.inherited).
TEMPLATE_FINGERPRINT = None


def _private_streams():
    proto_in = os.fdopen(os.dup(0), "rb", buffering=0)
    proto_out = os.fdopen(os.dup(1), "wb", buffering=0)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return proto_in, proto_out


def main() -> int:
    from opbench.run.bytecode_cache import stop_writing

    stop_writing()  # read the harness's compiled bytecode; a worker writes none
    proto_in, proto_out = _private_streams()
    from opbench.run import protocol

    cfg: dict[str, Any] = protocol.read_trusted(proto_in)
    t0 = time.perf_counter()
    # Everything the worker runs is imported before any candidate code is, so timers,
    # tensor methods and the judge's helpers are bound to the originals.
    import torch

    from opbench.backends import directory, loader  # noqa: F401
    from opbench.instrument import candidate as candidate_mod
    from opbench.instrument import neighbours as neighbours_mod
    from opbench.instrument import observer as observer_mod
    from opbench.instrument import timing as timing_mod
    from opbench.instrument.integrity import Fingerprint
    from opbench.instrument.native_calls import after_timing, judge_with_route
    from opbench.instrument.records import TrialPlan
    from opbench.spec import variants  # noqa: F401
    from opbench.spec.judge_options import JudgeOptions
    from opbench.spec.ops import get_overload
    from opbench.spec.reference import is_reference_backend
    from opbench.suites import draw_pool
    from opbench.suites.case import Case, timing_seeds
    from opbench.suites.materialize import kept_inputs, materialize

    device = cfg["device"]
    neighbours_mod.enable_subreaper()
    if cfg.get("threads"):
        torch.set_num_threads(int(cfg["threads"]))
    # the same backend settings for both sides (TF32 off unless the run allows it)
    from opbench.instrument import settings as settings_mod

    settings_mod.pin(allow_tf32=bool(cfg.get("allow_tf32")))
    from opbench.instrument.tensors import bind_device

    bind_device(device)
    from opbench.instrument.interpreter_rounding import install_if_interpreting

    install_if_interpreting()  # bfloat16 stores rounded as on a GPU, before candidate code
    if not (device == "cpu" and WARMED_BY_TEMPLATE):
        warm_up(device)  # a fork of the template (opbench.run.forkserver) is warm on CPU
    protocol.write_plain(
        proto_out, {"type": "ready", "pid": os.getpid(), "settings": settings_mod.read()}
    )

    # The harness then says which code this worker judges: one isolation unit
    # (opbench.backends.units), or None for a backend that is one unit (aten, module:).
    try:
        msg = protocol.read_trusted(proto_in)
    except EOFError:
        return 0
    if msg.get("type") == "program":
        # a whole program (opbench.programs): one candidate per process, then exit
        from opbench.programs.instrument import run_program

        try:
            answer = run_program(msg, device)
        except Exception as e:  # a harness-side bug (or a broken problem file): report it
            answer = {"worker_error": f"{type(e).__name__}: {e}", "tb": traceback.format_exc()}
        broken = _cuda_context_error(device)
        if broken:
            answer["poisoned"] = broken
        protocol.write_plain(proto_out, answer)
        return 0
    if msg.get("type") != "load":
        return 0
    unit = msg.get("unit")
    if msg.get("triton_cache"):
        # the folder the harness seeded with this unit's kept kernels
        # (opbench.run.triton_cache); Triton reads the variable at each compile
        os.makedirs(msg["triton_cache"], exist_ok=True)
        os.environ["TRITON_CACHE_DIR"] = msg["triton_cache"]
    # kernels that declare a native launch are called through the C++ gate, as a model
    # calls them; the gate is loaded before the fingerprint and before any candidate code
    native = native_calls_for(device, JudgeOptions(**cfg.get("judge_options", {})))
    fingerprint = Fingerprint.inherited(TEMPLATE_FINGERPRINT)
    # every thread and process alive now is the worker's own (PyTorch's, CUDA's, the
    # intra-op pool's): anything later that is not is the unit's (instrument/neighbours.py)
    # the threads that draw large inputs' chunks are the worker's own too (suites/draw_pool.py)
    draw_pool.start()
    before_pool = neighbours_mod.census().threads
    _start_intraop_pool()
    watch = neighbours_mod.NeighbourWatch(pool=neighbours_mod.census().threads - before_pool)
    window = observer_mod.ExecutionWindow()
    try:
        with window, window.mark():
            backend = loader.load_backend(
                cfg["backend"],
                device,
                kernel_version=cfg.get("kernel_version"),
                only=set(unit) if unit is not None else None,
            )
        info: dict[str, Any] = {
            "type": "loaded",
            "unit": unit,
            "load_errors": dict(getattr(backend, "load_errors", {}) or {}),
            "served": sorted(backend.served_ops()),
            "import_observed": window.result.to_dict(),
            "import_tamper": fingerprint.changes(),
        }
        watch.look()
        info["import_neighbours"] = watch.readings()["newcomers"]
    except Exception as e:
        info = {"type": "fatal", "error": f"{type(e).__name__}: {e}", "tb": traceback.format_exc()}
        protocol.write_plain(proto_out, info)
        return 3
    info["startup_s"] = time.perf_counter() - t0
    protocol.write_plain(proto_out, info)

    judge_options = JudgeOptions(**cfg.get("judge_options", {}))
    # observed unless the backend is PyTorch itself (decided from the spec, as the judge
    # does: a kernel file that exports the ATen overload is delegating, not "aten")
    guard_on = not is_reference_backend(cfg["backend"])
    timing_options = None
    if cfg.get("perf"):
        timing_options = timing_mod.TimingOptions(**cfg.get("timing_options", {}))

    while True:
        try:
            msg = protocol.read_trusted(proto_in)
        except EOFError:
            return 0
        if msg.get("type") == "stop":
            return 0
        case = Case.from_dict(msg["case"])
        plan = TrialPlan.from_dict(msg["plan"]) if msg.get("plan") else None
        out: dict[str, Any] = {"type": "result", "test_id": case.test_id}
        started = time.perf_counter()
        watch.reset()
        try:
            with kept_inputs():  # the test's two seeds drawn once each
                kernel = backend.kernel_for(case.op)
                if kernel is None:
                    out["no_kernel"] = True
                else:

                    def judge(fn: Any, case: Case = case, plan: Any = plan) -> Any:
                        return candidate_mod.run_candidate(
                            case,
                            fn,
                            device,
                            judge_options,
                            plan,
                            fingerprint=fingerprint,
                            guard=guard_on,
                            after_call=watch.look,
                        )

                    route = native.route(case.op, kernel) if native is not None else None
                    report, kernel, call_route = judge_with_route(
                        native,
                        route,
                        case.op,
                        kernel,
                        judge,
                        lambda case=case: materialize(case, device, timing_seeds(case)[0]),
                    )
                    if call_route is not None:
                        out["call_route"] = call_route
                    out["report"] = report
                    if timing_options is not None and _timeable(report):
                        ref = get_overload(case.op)
                        seed, second = timing_seeds(case)
                        out.update(
                            _timed(
                                ref,
                                kernel,
                                (
                                    lambda case=case, s=seed: materialize(case, device, s),
                                    lambda case=case, s=second: materialize(case, device, s),
                                ),
                                device,
                                timing_options,
                                fingerprint,
                                guard_on=guard_on,
                                watch=watch,
                            )
                        )
                    if route is not None and (call_route or {}).get("route") == "native":
                        after_timing(route, out)
                    watch.look()
                    out["neighbours"] = watch.readings()
        except Exception as e:  # a harness-side bug in the worker: report, keep serving
            out["worker_error"] = f"{type(e).__name__}: {e}"
            out["tb"] = traceback.format_exc(limit=8)
        out["elapsed_s"] = time.perf_counter() - started
        broken = _cuda_context_error(device)
        if broken:
            # An illegal access (or a device-side assert) poisons this process's CUDA
            # context: every later test here would fail for no fault of its own. Say so
            # and leave; the pool records a crash and starts a fresh worker.
            out["poisoned"] = broken
            protocol.write_plain(proto_out, out)
            return 4
        protocol.write_plain(proto_out, out)


def _timed(
    ref: Any,
    kernel: Any,
    draws: tuple[Any, Any],
    device: str,
    options: Any,
    fingerprint: Any,
    *,
    guard_on: bool,
    watch: Any,
) -> dict[str, Any]:
    """Time the pair under the call observer; the process is checked before and after.

    Each side's calls are marked with its own scope, so the harness can tell the
    candidate's calls from the reference's. A process that changed since the candidate
    was imported (thread count, backend settings, patched functions) is not timed.
    ``draws``: the builders of the case's two timing draws
    (:func:`opbench.suites.case.timing_seeds`); each kept output goes back with the
    draw its call saw.
    """
    from opbench.instrument import timing as timing_mod
    from opbench.instrument.observer import CANDIDATE_SCOPE, REFERENCE_SCOPE, ExecutionWindow
    from opbench.instrument.timed import DrawLookup, keeping_timed, timed_outputs

    before = fingerprint.changes()
    if before:
        fingerprint.restore_settings()
        return {"timing_tamper": before}
    last: list[Any] = []
    draws_seen = DrawLookup()
    # The same wrapper around both sides: what it costs a call (the draw lookup, the
    # reservoir draws, holding five outputs alive, which changes what the caching
    # allocator hands the next call) is paid by the reference too, so host-inclusive
    # speedups do not charge the judge's bookkeeping to the candidate. The reference's
    # kept outputs are dropped.
    kernel = keeping_timed(kernel, last, draws_seen.draw_of, draws_seen.phase_of)
    ref = keeping_timed(ref, [], draws_seen.draw_of, draws_seen.phase_of)
    make_args, make_second = draws
    draw_kw = {
        "alternate_args": make_second,
        "inputs_ready": draws_seen.ready,
        "reference_window": watch.reference,
        "look": watch.look,
    }
    if not guard_on:
        timing = timing_mod.time_pair(ref, kernel, make_args, device, options, **draw_kw)
        return {"timing": timing, **timed_outputs(last, device)}
    window = ExecutionWindow()
    with window:
        timing = timing_mod.time_pair(
            _scoped_call(ref, window, REFERENCE_SCOPE),
            _scoped_call(kernel, window, CANDIDATE_SCOPE),
            make_args,
            device,
            options,
            observer_pause=window.pause,
            **draw_kw,
        )
    return {
        "timing": timing,
        "timing_observed": window.result.to_dict(),
        "timing_tamper": fingerprint.changes(),
        **timed_outputs(last, device),
    }


def native_calls_for(device: str, options: Any) -> Any:
    """The worker's gated registrations (:mod:`opbench.instrument.native_calls`) on a
    CUDA device where the run calls kernels as a model does; else None (every kernel is
    called as its Python function)."""
    from opbench.instrument.native_calls import NativeCalls

    if not device.startswith("cuda") or not options.native_calls:
        return None
    return NativeCalls.loaded("CUDA")


def _scoped_call(fn: Any, window: Any, scope: str) -> Any:
    """``fn`` with each call marked by ``scope`` while the window records (both sides
    get the same wrapper, so its cost is the same on both)."""
    mark = window.mark

    def call(*args: Any, **kwargs: Any) -> Any:
        with mark(scope):
            return fn(*args, **kwargs)

    call._schema = getattr(fn, "_schema", None)  # type: ignore[attr-defined]
    return call


def preload() -> None:
    """Import :data:`WORKER_MODULES` and make the first reply's ``torch.save`` once (its
    first call imports the serialization config): what the fork server's template does
    so that each worker forked from it starts with them."""
    import importlib
    import io

    for name in WORKER_MODULES:
        importlib.import_module(name)
    import torch

    from opbench.run import protocol

    protocol.write_plain(io.BytesIO(), {"type": "preload", "tensor": torch.zeros(1)})


def _cuda_context_error(device: str) -> str | None:
    """None while the CUDA context still works, else the error that broke it.

    CUDA errors such as an illegal memory access are sticky: the context is unusable
    from then on, and the error surfaces at the next synchronising call, whoever makes it.
    """
    if not device.startswith("cuda"):
        return None
    import torch

    try:
        torch.cuda.synchronize(device)
        probe = torch.ones(4, device=device)
        if float((probe + probe).sum().item()) != 8.0:
            return "the CUDA context computes wrong results (1 + 1 != 2)"
        return None
    except Exception as e:  # any failure here means the context cannot be trusted
        return f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300]}"


def warm_up(device: str) -> None:
    """Pay one-time costs before saying "ready", not inside the first test's timeout.

    The first tensor call under a dispatch mode imports ``torch._dynamo`` (~1.5-3 s on
    a small CPU), and building inputs imports the suites; a spare worker does this while
    it waits, so a replacement answers its first test as fast as an old worker.
    Runs before any candidate code is imported; the fork server's template runs the same
    steps once for all the workers it forks (:func:`opbench.run.forkserver.template_steps`).
    """
    for _, step in warm_up_steps(device):
        step()


def warm_up_steps(device: str) -> list[tuple[str, Any]]:
    """:func:`warm_up` as named steps, so a template that finds its forks spoiled can say
    which step did it. Each step is an optimisation: one that fails says so on stderr
    and the tests show the real problem."""

    def overload_table() -> None:
        # Every worker reads its unit's folder names against the overload table: built
        # once here, it is shared by the template's forks (7 ms to build in-process,
        # ~16 ms in a fresh fork, once per operator: 13 s over the quick OpInfo
        # profile's 817 units).
        from opbench.spec.ops import overloads_by_op

        overloads_by_op()

    def opinfo_database() -> None:
        # OpInfo cases need op_db (~2 s to import): a template imports it once for all
        # the workers it forks, instead of every per-operator worker importing it again
        if "opinfo" not in os.environ.get("OPBENCH_PRELOAD", "").split(","):
            return
        try:
            warm_opinfo_database()
        except Exception as e:  # the first OpInfo case will report the real problem
            print(
                f"opbench worker: OpInfo preload failed: {type(e).__name__}: {e}", file=sys.stderr
            )

    def first_call() -> None:
        import torch

        from opbench.instrument.observer import DispatchRecorder, ExecutionWindow
        from opbench.suites.case import Case
        from opbench.suites.materialize import materialize

        try:
            args, _ = materialize(Case(op="relu.default", args="((T([4], f32),), {})"), device)
            with ExecutionWindow() as window, window.mark(), DispatchRecorder():
                torch.relu(args[0]).detach().cpu().numpy()
        except Exception as e:  # the tests will show real problems
            print(f"opbench worker: warm-up failed: {type(e).__name__}: {e}", file=sys.stderr)

    steps = [
        ("overload table", overload_table),
        ("OpInfo database", opinfo_database),
        ("first call", first_call),
    ]
    if device.startswith("cuda"):
        steps.append(("Triton compiler key", warm_triton_compiler))
    return steps


#: Modules Triton imports only at a process's first launch of a kernel, found by the
#: probe ``benchmarks/probes/first_test_profile.py`` on the H100 (Triton 3.6): the
#: launcher's argument specialisation imports Gluon (0.22 s, its sources compiled anew
#: in each process where the site-packages hold no bytecode).
TRITON_FIRST_LAUNCH_IMPORTS = (
    "triton.experimental.gluon",
    "triton.experimental.gluon.nvidia.hopper",
    "triton.backends.nvidia.driver",
    "triton.compiler.compiler",
    "triton.runtime.build",
)


def warm_triton_compiler() -> None:
    """Compute and import what Triton's first launch in a process computes and imports
    before it can even look in its cache, so that a worker's first test does not pay it.

    ``triton_key()`` hashes Triton's own sources and its ~500 MB ``libtriton.so`` (0.9 s
    on the 2-core CPU machine), once per process and before every cache lookup: each
    fresh fork paid it inside its first test of a Triton kernel already compiled on disk
    (issue #35). ``get_ptxas_version`` runs ``ptxas --version`` in a subprocess. Neither
    touches CUDA (nor do the imports: the driver module loads ``libcuda`` only when first
    used), so the fork server's template runs this for its GPU workers' forks.
    Names moved between Triton versions: whatever is missing is skipped (an optimisation).
    """
    import importlib
    import importlib.util

    if importlib.util.find_spec("triton") is None:
        return
    for module in TRITON_FIRST_LAUNCH_IMPORTS:
        with contextlib.suppress(Exception):
            importlib.import_module(module)
    for module in ("triton.runtime.cache", "triton.compiler.compiler"):
        try:
            key = getattr(importlib.import_module(module), "triton_key", None)
        except Exception:
            continue
        if key is not None:
            key()
            break
    try:
        from triton.backends.nvidia import compiler as nvidia
    except Exception:
        return
    version = getattr(nvidia, "get_ptxas_version", None)
    if version is None:
        return
    for arch in (80, 90):  # Triton picks a ptxas per architecture (Hopper: the newer)
        try:
            version(arch)  # type: ignore[misc]
        except Exception:  # no such argument (older Triton), or no ptxas: compile says
            with contextlib.suppress(Exception):
                version()  # type: ignore[misc]
            break


def _start_intraop_pool() -> None:
    """Run one parallel op, so the intra-op pool's threads exist before the census.

    The pool is started lazily, at the first op that splits its work; if the
    reference's first such op started it, its threads would look like the unit's."""
    import torch

    if torch.get_num_threads() > 1:
        x = torch.ones(1 << 20)
        (x + x).sum().item()


def _timeable(report: Any) -> bool:
    """Time only candidates that ran without raising; the verdict comes later."""
    return not getattr(report, "error", None) and not getattr(report, "skipped", None)


if __name__ == "__main__":
    sys.exit(main())
