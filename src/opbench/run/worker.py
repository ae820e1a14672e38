"""The worker process: the only place where candidate kernels are imported and run.

Started by :mod:`opbench.run.pool` as ``python -m opbench.run.worker`` (possibly inside
a sandbox). It reads its configuration and then one case at a time from stdin, runs
the candidate side of the judgement (:func:`opbench.judge.evaluate.run_candidate`) and,
when asked, the interleaved timing of reference against candidate, and writes plain
data back on a private copy of stdout. File descriptor 1 is pointed at stderr before
any candidate code is imported, so a kernel that prints cannot corrupt the protocol.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from typing import Any


def _private_streams():
    proto_in = os.fdopen(os.dup(0), "rb", buffering=0)
    proto_out = os.fdopen(os.dup(1), "wb", buffering=0)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return proto_in, proto_out


def main() -> int:
    proto_in, proto_out = _private_streams()
    from opbench.run import protocol

    cfg: dict[str, Any] = protocol.read_trusted(proto_in)
    t0 = time.perf_counter()
    # Timers and judge functions are captured before any candidate code is imported.
    import torch

    from opbench.judge import timing as timing_mod  # noqa: F401  (captures timers at import)
    from opbench.judge.evaluate import JudgeOptions, run_candidate
    from opbench.suites.case import Case
    from opbench.suites.materialize import materialize

    device = cfg["device"]
    if cfg.get("threads"):
        torch.set_num_threads(int(cfg["threads"]))
    if device.startswith("cuda"):
        torch.cuda.set_device(torch.device(device))
    _warm_up(device)
    info: dict[str, Any] = {"type": "ready", "pid": os.getpid()}
    try:
        from opbench.backends.loader import load_backend

        backend = load_backend(cfg["backend"], device, kernel_version=cfg.get("kernel_version"))
        info["load_errors"] = dict(getattr(backend, "load_errors", {}) or {})
        info["served"] = sorted(backend.served_ops())
    except Exception as e:
        info = {"type": "fatal", "error": f"{type(e).__name__}: {e}", "tb": traceback.format_exc()}
        protocol.write_plain(proto_out, info)
        return 3
    info["startup_s"] = time.perf_counter() - t0
    protocol.write_plain(proto_out, info)

    judge_options = JudgeOptions(**cfg.get("judge_options", {}))
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
        out: dict[str, Any] = {"type": "result", "test_id": case.test_id}
        started = time.perf_counter()
        try:
            kernel = backend.kernel_for(case.op)
            if kernel is None:
                out["no_kernel"] = True
            else:
                report = run_candidate(case, kernel, device, judge_options)
                out["report"] = report
                if timing_options is not None and _timeable(report):
                    from opbench.spec.ops import get_overload

                    ref = get_overload(case.op)
                    out["timing"] = timing_mod.time_pair(
                        ref,
                        kernel,
                        lambda case=case: materialize(case, device),
                        device,
                        timing_options,
                    )
                    out["work"] = _work(case, ref, device)
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


def _work(case: Any, ref: Any, device: str) -> dict[str, Any] | None:
    """Bytes and FLOPs the op must do (from the reference's inputs and outputs) and the
    device's measured peaks, for the roofline. Failures here never fail the test."""
    from opbench.judge import roofline
    from opbench.suites.materialize import materialize

    try:
        args, kwargs = materialize(case, device)
        outputs = ref(*args, **kwargs)
        work = roofline.work_of(case.op, args, kwargs, outputs)
        peaks = roofline.measure_peaks(device)
        return {"work": work.to_dict(), "peaks": peaks.to_dict(), "dtype": _main_dtype(args)}
    except Exception as e:  # roofline is information, not a verdict input
        return {"error": f"{type(e).__name__}: {e}"}


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


def _main_dtype(args: Any) -> str | None:
    import torch

    stack = list(args)
    while stack:
        v = stack.pop(0)
        if isinstance(v, torch.Tensor):
            return str(v.dtype).replace("torch.", "")
        if isinstance(v, (list, tuple)):
            stack[:0] = list(v)
    return None


def _warm_up(device: str) -> None:
    """Pay one-time costs before saying "ready", not inside the first test's timeout.

    The first tensor call under a dispatch mode imports ``torch._dynamo`` (~1.5-3 s on
    a small CPU), and building inputs imports the suites; a spare worker does this while
    it waits, so a replacement answers its first test as fast as an old worker.
    Runs before any candidate code is imported.
    """
    import torch

    from opbench.judge import guard as guard_mod
    from opbench.suites.case import Case
    from opbench.suites.materialize import materialize

    try:
        args, _ = materialize(Case(op="relu.default", args="((T([4], f32),), {})"), device)
        with guard_mod.DispatchRecorder():
            torch.relu(args[0]).detach().cpu().numpy()
    except Exception as e:  # warm-up is an optimisation; the tests will show real problems
        print(f"opbench worker: warm-up failed: {type(e).__name__}: {e}", file=sys.stderr)


def _timeable(report: Any) -> bool:
    """Time only candidates that ran without raising; the verdict comes later."""
    return not getattr(report, "error", None) and not getattr(report, "skipped", None)


if __name__ == "__main__":
    sys.exit(main())
