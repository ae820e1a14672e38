"""The worker factory under contention: many slots take, preload and retire spares at
once, and none ever sees a spare before it can be waited on (issue #35: a slot once
joined a spare's warm-up thread before it had started, "cannot join thread before it
is started", and the run died).

Workers here are fakes (no process, no torch import), so thousands of hand-overs fit
in a few seconds; every ``Thread.start`` sleeps a little first, which widens the
window between creating a thread and starting it, where the race lived. The fakes
check what a real worker cannot survive: two threads talking to it at once (both
would read its one answer pipe), loading a second unit, or going to two slots.
"""

from __future__ import annotations

import contextlib
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from opbench.run import pool
from opbench.run.pool import WorkerConfig, WorkerFactory, WorkerStartError

SLOTS = 8
ROUNDS = 300
#: None: the whole backend, aten's one unit
UNITS = [("relu__default",), ("neg__default",), ("add__Tensor",), None]


class _Problems:
    """What went wrong anywhere, from any thread (asserted empty at the end)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.seen: list[str] = []

    def add(self, what: str) -> None:
        with self._lock:
            self.seen.append(what)


PROBLEMS = _Problems()


class FakeWorker:
    """The parts of :class:`opbench.run.pool.WorkerProcess` the factory and a slot use,
    with a short, random start-up and load time, and checks of how it is used."""

    def __init__(self, config, device, log_dir, name, forkserver=None) -> None:
        self.name = name
        self.device = device
        self.config = config
        self.ready_info = None
        self.loaded_info = None
        self.unit = None
        self.warm_thread = None
        self.preload_asked = False
        self.preload_unit = None
        self.preload_result = None
        self.sandbox_level = "off"
        self.forked = False
        self.owner: str | None = None
        self._dead = False
        self._busy = threading.Lock()

    @contextlib.contextmanager
    def _talking(self, what: str) -> Iterator[None]:
        if not self._busy.acquire(blocking=False):
            PROBLEMS.add(f"{self.name}: {what} while another thread talked to it")
            yield
            return
        try:
            yield
        finally:
            self._busy.release()

    def wait_ready(self) -> dict:
        with self._talking("wait_ready"):
            if self.ready_info is not None:
                PROBLEMS.add(f"{self.name}: waited for ready twice")
            time.sleep(random.uniform(0, 0.002))
            if self._dead:
                raise WorkerStartError(f"worker {self.name} failed to start: killed")
            self.ready_info = {"type": "ready"}
            return self.ready_info

    def load(self, unit) -> dict:
        with self._talking(f"load {unit}"):
            if self.loaded_info is not None:
                raise RuntimeError(f"worker {self.name} already judges another unit")
            time.sleep(random.uniform(0, 0.002))
            if self._dead:
                raise WorkerStartError(f"worker {self.name} died before loading its kernels")
            self.unit = unit
            self.loaded_info = {"type": "loaded", "unit": unit}
            return self.loaded_info

    def alive(self) -> bool:
        return not self._dead

    def kill(self) -> None:
        self._dead = True

    def stop(self) -> None:
        self.kill()

    def retire(self) -> None:
        threading.Thread(target=self.kill, daemon=True).start()


@pytest.fixture
def slow_thread_start(monkeypatch) -> None:
    """Every thread sleeps up to 2 ms before it starts: a thread published before it
    started is then seen by other slots far more often than by chance."""
    real_start = threading.Thread.start

    def start(self: threading.Thread) -> None:
        time.sleep(random.uniform(0, 0.002))
        real_start(self)

    monkeypatch.setattr(threading.Thread, "start", start)


@pytest.fixture
def thread_errors(monkeypatch) -> None:
    """An exception that ends any thread (a spare's preload thread) is a problem too."""
    monkeypatch.setattr(
        threading,
        "excepthook",
        lambda args: PROBLEMS.add(
            f"thread {args.thread.name if args.thread else '?'}: "
            f"{args.exc_type.__name__}: {args.exc_value}"
        ),
    )


def test_a_spare_is_preloaded_once_even_with_the_whole_backend_as_its_unit(
    tmp_path: Path, monkeypatch, thread_errors
) -> None:
    """aten's one unit is None, which also meant "not asked to preload": a second
    preload of the same spare started a second loader, whose load raised "already judges
    another unit" in its thread (every CPU run with two workers on 2026-11-28)."""
    PROBLEMS.seen.clear()
    monkeypatch.setattr(pool, "WorkerProcess", FakeWorker)
    cfg = WorkerConfig(backend="aten", device="cpu", fork_server=False, spare_workers=1)
    factory = WorkerFactory(cfg, tmp_path / "logs")
    try:
        factory.get("cpu", None)  # starts the spare
        factory.preload("cpu", None)
        factory.preload("cpu", None)  # another slot asks the same spare: already asked
        w = factory.get("cpu", None)
    finally:
        factory.close()
    assert not PROBLEMS.seen, PROBLEMS.seen
    assert w.preload_asked and w.preload_result == {"type": "loaded", "unit": None}


class SlowStartWorker(FakeWorker):
    """A fake whose process takes 50 ms to launch (a fork server's template starting)."""

    created: list[str] = []

    def __init__(self, *args, **kwargs) -> None:
        time.sleep(0.05)
        super().__init__(*args, **kwargs)
        SlowStartWorker.created.append(self.name)


def test_slots_that_ask_while_warm_workers_start_take_them_and_start_none_of_their_own(
    tmp_path: Path, monkeypatch, thread_errors
) -> None:
    """A run warms one worker a slot before its first plan (``WorkerFactory.warm``); a
    slot that asks while they still start waits for one of them, rather than start a
    worker of its own behind them on the one spawner thread (which would make the first
    test wait for two starts)."""
    PROBLEMS.seen.clear()
    SlowStartWorker.created.clear()
    monkeypatch.setattr(pool, "WorkerProcess", SlowStartWorker)
    cfg = WorkerConfig(backend="aten", device="cpu", fork_server=False, spare_workers=1)
    factory = WorkerFactory(cfg, tmp_path / "logs")
    got: list[str] = []
    try:
        factory.warm("cpu", 3)
        time.sleep(0.01)  # the warm threads have counted their starts; none has finished
        takers = [
            threading.Thread(target=lambda: got.append(factory.get("cpu", None).name))
            for _ in range(3)
        ]
        for t in takers:
            t.start()
        for t in takers:
            t.join(timeout=10)
        started_for_slots = factory.started
    finally:
        factory.close()
    assert not PROBLEMS.seen, PROBLEMS.seen
    assert sorted(got) == sorted(SlowStartWorker.created[:3])  # the warmed ones
    # the three warmed workers, then at most one spare for the next chunk
    assert started_for_slots <= 4, started_for_slots


@pytest.mark.slow
def test_many_slots_take_preload_and_retire_spares_at_once(
    tmp_path: Path, monkeypatch, slow_thread_start, thread_errors
) -> None:
    PROBLEMS.seen.clear()
    monkeypatch.setattr(pool, "WorkerProcess", FakeWorker)
    cfg = WorkerConfig(backend="aten", device="cpu", fork_server=False, spare_workers=2)
    factory = WorkerFactory(cfg, tmp_path / "logs")
    owned: set[str] = set()
    owned_lock = threading.Lock()
    served = [0] * SLOTS
    preloaded = [0] * SLOTS

    def slot(k: int) -> None:
        rng = random.Random(k)
        for _ in range(ROUNDS):
            unit = rng.choice(UNITS)
            try:
                w = factory.get("cpu", unit)
                with owned_lock:
                    if w.name in owned:
                        PROBLEMS.add(f"{w.name} handed to two slots")
                    owned.add(w.name)
                if w.ready_info is None or not w.alive():
                    PROBLEMS.add(f"{w.name} handed out unready or dead")
                # what LocalExecutor._worker_for does with a worker it is given
                info = w.preload_result if w.preload_unit == unit else None
                preloaded[k] += info is not None
                if info is None:
                    info = w.load(unit)
                if w.unit != unit:
                    PROBLEMS.add(f"{w.name} judges {w.unit}, asked for {unit}")
                factory.preload("cpu", rng.choice(UNITS))
                time.sleep(rng.uniform(0, 0.001))
                with owned_lock:
                    owned.discard(w.name)
                w.retire()
                served[k] += 1
            except Exception as e:  # noqa: BLE001 - every failure is a finding
                PROBLEMS.add(f"slot {k}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=slot, args=(k,)) for k in range(SLOTS)]
    t0 = time.perf_counter()
    factory.warm("cpu", SLOTS)  # as a run starts: its slots' workers, warmed ahead
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
    finally:
        factory.close()
    elapsed = time.perf_counter() - t0
    assert not any(t.is_alive() for t in threads), "a slot hung"
    kinds = Counter(re.sub(r"worker-\d+|slot \d+|\('\w+',\)", "_", p) for p in PROBLEMS.seen)
    assert not PROBLEMS.seen, f"{len(PROBLEMS.seen)} problems: {kinds.most_common()}"
    assert served == [ROUNDS] * SLOTS
    # spares were really made, taken and preloaded: the paths under test ran
    assert factory.started >= SLOTS * ROUNDS // 2
    assert sum(preloaded) >= SLOTS * ROUNDS // 50, preloaded
    print(
        f"{SLOTS} slots x {ROUNDS} rounds in {elapsed:.1f} s: {factory.started} workers, "
        f"{sum(preloaded)} taken preloaded"
    )
