"""The adversarial corpus: kernels that each try one trick, run together through the real
``opbench run`` path (:func:`opbench.run.session.run`), next to honest kernels.

Each trick must be caught with the right category, the run must complete, and the honest
kernels in the same run must still pass. The kernels live in ``kernels/`` (BackendBench
layout, one folder per overload, a docstring naming the trick); they are copied to a
temporary folder so a trick that escapes cannot touch the repository.
"""

from __future__ import annotations

import shutil
import socket
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from opbench.run import sandbox
from opbench.run.session import RunRequest, run
from opbench.run.store import ResultStore

KERNELS = Path(__file__).resolve().parent / "kernels"

#: A tiny trace file: one line per test; the crashing op has five tests so the
#: --max-crashes-per-op budget (3) leaves some not run.
TRACES = """\
Operator: aten.relu.default
cnt: 3, ((T([64, 32], f32),), {})
cnt: 2, ((T([257], f32),), {})
Operator: aten.mul.Tensor
cnt: 3, ((T([16, 8], f32), T([16, 8], f32)), {})
cnt: 1, ((T([4, 8], f32), T([8], f32)), {})
Operator: aten.neg.default
cnt: 5, ((T([8], f32),), {})
cnt: 4, ((T([9], f32),), {})
cnt: 3, ((T([10], f32),), {})
cnt: 2, ((T([11], f32),), {})
cnt: 1, ((T([12], f32),), {})
"""
SINGLE_OPS = "abs sin cos sigmoid tanh exp expm1 erf atan cosh ceil trunc frac".split()
TEST_TIMEOUT_S = 10.0
MEMORY_LIMIT_MB = 1000

#: op -> categories that count as caught (the judge's word for the trick).
EXPECTED: dict[str, set[str]] = {
    "abs.default": {"timeout"},  # infinite loop
    "sin.default": {"crash"},  # sys.exit
    "cos.default": {"crash"},  # os._exit
    "sigmoid.default": {"oom"},  # allocates until stopped
    "tanh.default": {"wrong_result"},  # patched allclose/assert_close at import
    "expm1.default": {"wrong_result"},  # looked for the reference with gc
    "erf.default": {"cheat", "wrong_meta"},  # returned a tensor subclass
    "atan.default": {"wrong_result"},  # filled its output from a thread, later
    "cosh.default": {"wrong_result", "cheat"},  # cached results across calls
    "add.Tensor": {"calls_pytorch"},  # called torch.add
}
#: Tricks only a sandbox stops: they raise when blocked (category ``error``).
SANDBOX_ONLY: dict[str, str] = {
    "ceil.default": "writes into the run directory and the kernel folder",
    "trunc.default": "reads /proc/<harness pid>/mem",
    "frac.default": "opens a TCP connection",
}
HONEST = ("relu.default", "mul.Tensor", "exp.default")  # exp also freezes the clocks


class _Listener:
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


@pytest.fixture(scope="module")
def corpus_run(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("adversarial")
    kernels = tmp / "kernels"
    shutil.copytree(KERNELS, kernels, ignore=shutil.ignore_patterns("__pycache__"))
    traces = tmp / "corpus.txt"
    lines = [TRACES]
    for op in SINGLE_OPS:
        lines.append(f"Operator: aten.{op}.default\ncnt: 1, ((T([8, 8], f32),), {{}})\n")
    lines.append("Operator: aten.add.Tensor\ncnt: 1, ((T([8, 8], f32), T([8, 8], f32)), {})\n")
    traces.write_text("".join(lines))
    out = tmp / "run"
    listener = _Listener()
    mp = pytest.MonkeyPatch()
    mp.setenv("OPBENCH_ADV_RUN_DIR", str(out))
    mp.setenv("OPBENCH_ADV_HARNESS_PID", str(__import__("os").getpid()))
    mp.setenv("OPBENCH_ADV_PORT", str(listener.port))
    t0 = time.perf_counter()
    try:
        summary = run(
            RunRequest(
                suite=f"traces:{traces}",
                backend=str(kernels),
                device="cpu",
                perf=False,
                out=out,
                workers=2,
                test_timeout_s=TEST_TIMEOUT_S,
                max_crashes_per_op=3,
                sandbox="auto",
                memory_limit_mb=MEMORY_LIMIT_MB,
            )
        )
    finally:
        mp.undo()
        listener.close()
    elapsed = time.perf_counter() - t0
    store = ResultStore(out / "results.sqlite")
    results = list(store.results())
    store.close()
    by_op: dict[str, list] = defaultdict(list)
    for r in results:
        by_op[r.op].append(r)
    return {
        "summary": summary,
        "by_op": by_op,
        "out": out,
        "kernels": kernels,
        "listener": listener,
        "elapsed": elapsed,
    }


pytestmark = pytest.mark.slow


def test_run_completes_with_every_test_recorded(corpus_run):
    summary = corpus_run["summary"]
    n_cases = 2 + 2 + 5 + len(SINGLE_OPS) + 1
    assert summary["tests"]["total"] == n_cases
    assert sum(len(v) for v in corpus_run["by_op"].values()) == n_cases
    print(f"corpus run: {corpus_run['elapsed']:.1f} s, sandbox {summary['sandbox']}")


@pytest.mark.parametrize("op", HONEST)
def test_honest_kernels_still_pass(corpus_run, op):
    results = corpus_run["by_op"][op]
    assert results and all(r.status == "passed" for r in results), [
        (r.status, r.category, r.message) for r in results
    ]
    assert corpus_run["summary"]["ops"][f"aten.{op}"]["correct"] is True


@pytest.mark.parametrize("op", sorted(EXPECTED))
def test_trick_is_caught(corpus_run, op):
    (r,) = corpus_run["by_op"][op]
    assert r.status == "failed", (r.status, r.category, r.message)
    assert r.category in EXPECTED[op], (r.category, r.message)
    assert corpus_run["summary"]["ops"][f"aten.{op}"]["correct"] is False


def test_segfault_is_a_crash_and_the_budget_stops_the_op(corpus_run):
    results = corpus_run["by_op"]["neg.default"]
    kinds = Counter((r.status, r.category) for r in results)
    crashes = kinds[("failed", "crash")]
    not_run = kinds[("not_run", "crash")]
    # Two slots may each start one of the op's tests before the third crash lands.
    assert 3 <= crashes <= 4 and crashes + not_run == 5, kinds
    assert any("SIGSEGV" in r.message for r in results if r.status == "failed")
    assert all("--max-crashes-per-op" in r.message for r in results if r.status == "not_run")


def test_exit_calls_say_how_the_worker_died(corpus_run):
    for op in ("sin.default", "cos.default"):
        (r,) = corpus_run["by_op"][op]
        assert "exit code 0" in r.message, r.message


def test_oom_names_the_limit(corpus_run):
    (r,) = corpus_run["by_op"]["sigmoid.default"]
    assert f"{MEMORY_LIMIT_MB} MB limit" in r.message


def test_sandbox_level_is_recorded(corpus_run):
    expected = "bwrap" if sandbox.bwrap_works() else "none"
    assert corpus_run["summary"]["sandbox"] == expected


@pytest.mark.skipif(not sandbox.bwrap_works(), reason="bubblewrap (bwrap) is not usable here")
@pytest.mark.parametrize("op", sorted(SANDBOX_ONLY))
def test_sandbox_stops_escapes(corpus_run, op):
    (r,) = corpus_run["by_op"][op]
    assert (r.status, r.category) == ("failed", "error"), (SANDBOX_ONLY[op], r.message)


@pytest.mark.skipif(not sandbox.bwrap_works(), reason="bubblewrap (bwrap) is not usable here")
def test_escapes_left_no_trace(corpus_run):
    assert not (corpus_run["out"] / "pwned.txt").exists()
    assert not (corpus_run["kernels"] / "pwned.txt").exists()
    assert corpus_run["listener"].connections == 0
