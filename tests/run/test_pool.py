"""Worker processes: crashes are told apart, replacement is cheap, workers outlive the
thread that started them, and memory is measured over the whole sandboxed tree."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from worker_kernels import KERNELS, write_kernel_dir

from opbench.run.pool import WorkerConfig, WorkerFactory
from opbench.suites.case import Case

pytestmark = pytest.mark.slow

RELU = Case(op="relu.default", args="((T([16, 8], f32),), {})", suite="t")
NEG = Case(op="neg.default", args="((T([8], f32),), {})", suite="t")


@pytest.fixture(scope="module")
def kernels(tmp_path_factory) -> Path:
    return write_kernel_dir(tmp_path_factory.mktemp("pool") / "kernels", KERNELS)


@pytest.mark.parametrize("fork_server", [True, False])
def test_crash_then_cheap_replacement(kernels, tmp_path, fork_server):
    cfg = WorkerConfig(backend=str(kernels), device="cpu", sandbox="auto", fork_server=fork_server)
    factory = WorkerFactory(cfg, tmp_path / "logs")
    try:
        w = factory.get("cpu")
        w.load(None)
        costs = []
        for _ in range(3 if fork_server else 1):  # back to back: no time for a spare to warm
            out = w.run_case(NEG.to_dict(), 30)
            assert out.kind == "crash" and "SIGSEGV" in out.detail, out
            t0 = time.perf_counter()
            w = factory.get("cpu")
            w.load(None)
            ok = w.run_case(RELU.to_dict(), 30)
            costs.append(time.perf_counter() - t0)
            assert ok.kind == "result" and ok.message["report"]["error"] is None, ok
        print(f"fork_server={fork_server}: crash -> next test done in", [f"{c:.3f}" for c in costs])
        if fork_server:
            assert factory.forked >= 3
            assert max(costs) < 1.5, costs  # a fork, not a torch import (~2-6 s here)
        w.stop()
    finally:
        factory.close()


def test_worker_outlives_the_thread_that_started_it(kernels, tmp_path):
    """bwrap's --die-with-parent fires when the starting *thread* exits."""
    cfg = WorkerConfig(backend=str(kernels), device="cpu", sandbox="auto")
    factory = WorkerFactory(cfg, tmp_path / "logs", spares=False)
    got = {}
    t = threading.Thread(target=lambda: got.setdefault("w", factory.get("cpu")))
    t.start()
    t.join()
    time.sleep(0.3)
    w = got["w"]
    try:
        assert w.alive()
        w.load(None)
        assert w.run_case(RELU.to_dict(), 30).kind == "result"
        rss = w.rss_mb()
        assert rss is not None and rss > 100  # python + torch, seen through bwrap
    finally:
        w.stop()
        factory.close()


def test_timeout_kills_and_reports(kernels, tmp_path):
    loop = tmp_path / "loop"
    (loop / "relu__default").mkdir(parents=True)
    (loop / "relu__default" / "relu__default_implementation.py").write_text(
        "def relu__default_kernel_impl(x):\n    while True:\n        pass\n"
    )
    factory = WorkerFactory(
        WorkerConfig(backend=str(loop), device="cpu", sandbox="auto"), tmp_path / "l"
    )
    try:
        w = factory.get("cpu")
        w.load(None)
        t0 = time.perf_counter()
        out = w.run_case(RELU.to_dict(), 1.5)
        assert out.kind == "timeout" and time.perf_counter() - t0 < 5
        assert not w.alive()
    finally:
        factory.close()


def test_spare_preloads_the_next_unit_and_is_discarded_for_another(kernels, tmp_path):
    """WorkerFactory.preload: the spare imports a unit ahead of need; asking for that
    unit returns it already loaded (and it runs tests), asking for another unit never
    reuses it (a worker judges one unit only)."""
    cfg = WorkerConfig(backend=str(kernels), device="cpu", sandbox="off")
    factory = WorkerFactory(cfg, tmp_path / "logs")
    try:
        first = factory.get("cpu")  # starts a spare
        factory.preload("cpu", ("relu__default",))
        got = factory.get("cpu", ("relu__default",))
        assert got.preload_unit == ("relu__default",)
        assert got.preload_result is not None and got.preload_result["type"] == "loaded"
        assert got.unit == ("relu__default",) and got.loaded_info is not None
        assert got.run_case(RELU.to_dict(), 30).kind == "result"
        factory.preload("cpu", ("neg__default",))
        spare = factory._spares["cpu"][0]
        other = factory.get("cpu", ("relu__default",))
        assert other is not spare and other.loaded_info is None
        assert not spare.alive()
        for w in (first, got, other):
            w.stop()
    finally:
        factory.close()


def test_widen_pipe_grows_the_answer_pipe_within_the_kernel_cap():
    """A worker's answer of several GiB crosses a pipe; at the default 64 KiB buffer that
    is one read (and one deadline check) per 64 KiB."""
    import fcntl
    import os

    from opbench.run.pool import PIPE_BYTES, widen_pipe

    if not hasattr(fcntl, "F_GETPIPE_SZ"):
        pytest.skip("no F_GETPIPE_SZ on this platform")
    r, w = os.pipe()
    try:
        before = fcntl.fcntl(r, fcntl.F_GETPIPE_SZ)
        widen_pipe(r)
        with open("/proc/sys/fs/pipe-max-size") as f:
            cap = int(f.read())
        assert fcntl.fcntl(r, fcntl.F_GETPIPE_SZ) == max(before, min(PIPE_BYTES, cap))
    finally:
        os.close(r)
        os.close(w)


def test_a_raw_answer_is_the_bytes_the_worker_wrote(kernels, tmp_path):
    """``run_case(raw=True)`` (the Ray actor's relay) hands back the worker's message
    unread, and reading it gives what the harness reads itself; the crash of a worker is
    an outcome either way."""
    from opbench.run import protocol

    cfg = WorkerConfig(backend=str(kernels), device="cpu", sandbox="auto")
    factory = WorkerFactory(cfg, tmp_path / "logs", spares=False)
    try:
        w = factory.get("cpu")
        w.load(None)
        read = w.run_case(RELU.to_dict(), 30)
        raw = w.run_case(RELU.to_dict(), 30, raw=True)
        assert raw.kind == "result" and raw.message is None and isinstance(raw.raw, bytes)
        again = protocol.decode_plain(raw.raw)
        assert again["report"]["error"] is None
        assert again["report"]["op"] == read.message["report"]["op"] == "relu.default"
        assert w.run_case(NEG.to_dict(), 30, raw=True).kind == "crash"
    finally:
        factory.close()
