"""The adversarial corpus as data: which kernels try which trick, the trace lines that
exercise them, and the verdict each must get. Shared by the CPU test
(``test_corpus.py``) and the GPU run (``benchmarks/reproduce/gpu_adversarial.py``), so both judge
the same tricks the same way.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
KERNELS = HERE / "kernels"
GPU_KERNELS = HERE / "gpu_kernels"

#: One line per test; the crashing op has five tests so the --max-crashes-per-op
#: budget (3) leaves some not run.
TRACES = """\
Operator: aten.relu.default
cnt: 3, ((T([64, 32], f32),), {})
cnt: 2, ((T([257], f32),), {})
Operator: aten.mul.Tensor
cnt: 3, ((T([16, 8], f32), T([16, 8], f32)), {})
cnt: 1, ((T([4, 8], f32), T([8], f32)), {})
Operator: aten.div.Tensor
cnt: 1, ((T([16, 8], f32), T([16, 8], f32)), {})
Operator: aten.atan2.default
cnt: 1, ((T([16, 8], f32), T([16, 8], f32)), {})
Operator: aten.neg.default
cnt: 5, ((T([8], f32),), {})
cnt: 4, ((T([9], f32),), {})
cnt: 3, ((T([10], f32),), {})
cnt: 2, ((T([11], f32),), {})
cnt: 1, ((T([12], f32),), {})
"""
#: GPU only: the illegal-access op gets four tests (three crashes, then one not run);
#: the side-stream and honest Triton ops get sizes where device time is well above
#: the launch floor, so their timings mean something.
GPU_TRACES = """\
Operator: aten.floor.default
cnt: 4, ((T([4096], f32),), {})
cnt: 3, ((T([4097], f32),), {})
cnt: 2, ((T([4098], f32),), {})
cnt: 1, ((T([4099], f32),), {})
Operator: aten.sub.Tensor
cnt: 1, ((T([4096, 4096], f32), T([4096, 4096], f32)), {})
Operator: aten.maximum.default
cnt: 2, ((T([4096, 4096], f32), T([4096, 4096], f32)), {})
cnt: 1, ((T([1000], f32), T([1000], f32)), {})
"""
SINGLE_OPS = (
    "abs sin cos sigmoid tanh exp expm1 erf atan cosh ceil trunc frac "
    "log sqrt rsqrt log1p reciprocal sign exp2 erfc asinh log2 sinh"
).split()

#: op -> categories that count as caught (the judge's word for the trick).
#: These are the categories of the *runtime* layer: the corpus runs with every static-scan
#: rule allowed (``--allow``), so each trick reaches the worker. With the scan on (the
#: default), the tricks it recognises fail as ``tampering`` before any import
#: (:data:`SCAN_BLOCKS`).
EXPECTED: dict[str, set[str]] = {
    "abs.default": {"timeout"},  # infinite loop
    "sin.default": {"crash"},  # sys.exit
    "cos.default": {"crash"},  # os._exit
    "sigmoid.default": {"oom"},  # allocates until stopped
    "tanh.default": {"tampering", "wrong_result"},  # patched allclose/assert_close at import
    "expm1.default": {"wrong_result"},  # looked for the reference with gc
    "erf.default": {"cheat", "wrong_meta"},  # returned a tensor subclass
    "atan.default": {"wrong_result"},  # filled its output from a thread, later
    "cosh.default": {"wrong_result", "cheat"},  # cached results across calls
    "add.Tensor": {"calls_pytorch"},  # called torch.add
    # delegation the calling thread's dispatch mode cannot see
    "div.Tensor": {"calls_pytorch"},  # on a threading.Thread
    "atan2.default": {"calls_pytorch"},  # on a concurrent.futures pool thread
    "log.default": {"calls_pytorch"},  # inside torch._C._DisableTorchDispatch()
    "sqrt.default": {"calls_pytorch"},  # inside _disable_current_modes()
    "erfc.default": {"calls_pytorch"},  # on a thread started at import
    "exp2.default": {"calls_pytorch"},  # through a name built at run time (no scan finding)
    "asinh.default": {"calls_pytorch"},  # silenced the recorder during the call, restored it
    "sinh.default": {"calls_pytorch"},  # exported torch.ops.aten.sinh.default as its kernel
    # tampering with the worker's process
    "rsqrt.default": {"tampering"},  # replaced the recorder's __torch_dispatch__ at import
    "log1p.default": {"tampering"},  # patched torch.equal, Tensor.__eq__, the judge's helpers
    "sign.default": {"tampering"},  # torch.set_num_threads(1) at import
    # must keep its own verdict next to log1p's tampering in the same directory
    "reciprocal.default": {"mutates_input"},  # zeroed its input
}
#: Delegates only after its first three calls: passes when untimed, caught when timed.
TIMED_ONLY: dict[str, set[str]] = {"log2.default": {"calls_pytorch"}}
#: Ops whose kernel source the static scan fails as ``tampering`` before any import.
SCAN_BLOCKS = frozenset(
    """
    sin.default cos.default tanh.default expm1.default log.default sqrt.default
    rsqrt.default log1p.default sign.default asinh.default exp.default trunc.default
    neg.default
    """.split()
)
#: GPU only: op -> categories of its *failed* tests (not-run ones are checked apart).
GPU_EXPECTED: dict[str, set[str]] = {
    "floor.default": {"crash"},  # illegal memory access, poisoned context
}
#: Tricks only a sandbox stops: they raise when blocked (category ``error``).
SANDBOX_ONLY: dict[str, str] = {
    "ceil.default": "writes into the run directory and the kernel folder",
    "trunc.default": "reads /proc/<harness pid>/mem",
    "frac.default": "opens a TCP connection",
}
HONEST = ("relu.default", "mul.Tensor", "exp.default")  # exp also freezes the clocks
GPU_HONEST = ("maximum.default",)
#: Passes correctness, but must not come out faster: it hides its work on a side stream.
SIDE_STREAM = "sub.Tensor"


def n_cases(gpu: bool) -> int:
    """How many tests the corpus trace holds."""
    cpu = 2 + 2 + 2 + 5 + len(SINGLE_OPS) + 1
    return cpu + (4 + 1 + 2 if gpu else 0)


def build(tmp: Path, gpu: bool = False) -> tuple[Path, Path]:
    """Copy the kernels (and the GPU ones) under ``tmp`` and write the corpus trace.

    The copy keeps a trick that escapes away from the repository. Returns the kernel
    directory and the trace file.
    """
    kernels = tmp / "kernels"
    shutil.copytree(KERNELS, kernels, ignore=shutil.ignore_patterns("__pycache__"))
    if gpu:
        for d in GPU_KERNELS.iterdir():
            if d.is_dir() and not d.name.startswith("__"):
                shutil.copytree(d, kernels / d.name, ignore=shutil.ignore_patterns("__pycache__"))
    lines = [TRACES]
    for op in SINGLE_OPS:
        lines.append(f"Operator: aten.{op}.default\ncnt: 1, ((T([8, 8], f32),), {{}})\n")
    lines.append("Operator: aten.add.Tensor\ncnt: 1, ((T([8, 8], f32), T([8, 8], f32)), {})\n")
    if gpu:
        lines.append(GPU_TRACES)
    traces = tmp / "corpus.txt"
    traces.write_text("".join(lines))
    return kernels, traces


class Listener:
    """A TCP listener on loopback that records whether anyone connected."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._stop = False
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop = True
        self._thread.join(timeout=2)
        self.sock.close()


def all_scan_rules() -> list[str]:
    """Every static-scan rule id: ``allow_rules`` that lets each trick reach the worker."""
    from opbench.judge.static_scan import RULES

    return sorted(RULES)


def run_corpus(tmp: Path, *, gpu: bool = False, on_progress: Any = None, **request: Any) -> dict:
    """Build the corpus under ``tmp`` and run it through the real ``opbench run`` path.

    ``request`` holds the :class:`~opbench.run.session.RunRequest` fields that differ
    between the CPU test and the GPU run (device, perf, workers, timeouts, sandbox). The
    tricks that need to know where to aim (the run directory, the harness's PID, a
    listener's port) find them in ``OPBENCH_ADV_*`` variables for the run's duration.
    A run that raises is returned with ``error`` set and whatever the store holds.
    """
    from opbench.run.session import RunRequest, run
    from opbench.run.store import ResultStore

    kernels, traces = build(tmp, gpu=gpu)
    out = tmp / "run"
    listener = Listener()
    aims = {
        "OPBENCH_ADV_RUN_DIR": str(out),
        "OPBENCH_ADV_HARNESS_PID": str(os.getpid()),
        "OPBENCH_ADV_PORT": str(listener.port),
    }
    saved = {k: os.environ.get(k) for k in aims}
    os.environ.update(aims)
    summary: dict[str, Any] | None = None
    error = None
    t0 = time.perf_counter()
    try:
        req = RunRequest(
            suite=f"traces:{traces}",
            backend=str(kernels),
            out=out,
            max_crashes_per_op=3,
            **request,
        )
        summary = run(req, on_progress=on_progress)
    except Exception as e:  # a run that dies is a finding, reported by the caller
        error = f"{type(e).__name__}: {e}"
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        listener.close()
    elapsed = time.perf_counter() - t0
    by_op: dict[str, list] = defaultdict(list)
    if (out / "results.sqlite").exists():
        store = ResultStore(out / "results.sqlite")
        for r in store.results():
            by_op[r.op].append(r)
        store.close()
    return {
        "summary": summary,
        "error": error,
        "by_op": by_op,
        "out": out,
        "kernels": kernels,
        "listener": listener,
        "elapsed": elapsed,
    }


#: Kernels that remember answers across timed calls (``test_remembered_answers.py``).
TIMED_KERNELS = Path(__file__).resolve().parent / "timed_kernels"

#: Their cases, and an honest ``mul`` (from :data:`KERNELS`) that must keep its speedup.
REMEMBERING_TRACE = """\
Operator: aten.minimum.default
cnt: 2, ((T([64, 48], f32), T([64, 48], f32)), {})
cnt: 1, ((T([16], f32), T([4, 16], f32)), {})
Operator: aten.fmin.default
cnt: 1, ((T([64, 48], f32), T([64, 48], f32)), {})
Operator: aten.maximum.default
cnt: 1, ((T([64, 48], f32), T([64, 48], f32)), {})
Operator: aten.mul.Tensor
cnt: 1, ((T([64, 64], f32), T([64, 64], f32)), {})
"""


def remembering_kernels(dest: Path) -> Path:
    """:data:`TIMED_KERNELS` and the honest ``mul`` kernel, copied into ``dest``."""
    shutil.copytree(TIMED_KERNELS, dest, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(KERNELS / "mul__Tensor", dest / "mul__Tensor")
    return dest


def run_timed(tmp: Path, kernels: Path, trace: str, device: str = "cpu") -> dict[str, list]:
    """Judge ``kernels`` on the trace text ``trace`` with timing on, on ``device``, through
    the real ``opbench run`` path; the results by overload. For tricks that only the timed
    calls show (the corpus run itself is untimed)."""
    from opbench.run.session import RunRequest, run
    from opbench.run.store import ResultStore

    path = tmp / "timed-trace.txt"
    path.write_text(trace)
    out = tmp / "timed-run"
    run(
        RunRequest(
            suite=f"traces:{path}",
            backend=str(kernels),
            device=device,
            perf=True,
            out=out,
            sandbox="auto",
        )
    )
    store = ResultStore(out / "results.sqlite")
    by_op: dict[str, list] = defaultdict(list)
    for r in store.results():
        by_op[r.op].append(r)
    store.close()
    return by_op
