"""Scale past one machine: the local executor's slots, each served by a Ray actor.

``--executor ray`` is :class:`~opbench.run.executor.LocalExecutor` with another worker
factory. Its slots run here, in the harness, exactly as in a local run: they take
chunks of one isolation unit, plan each test's trials and compute its expectations
(:func:`opbench.judge.expectations.plan_trials`, one test ahead), send the test, and
judge what comes back with :func:`~opbench.run.outcome_verdict.judge_outcome` against those
same expectations, then store it. What differs is only where the worker process lives:
each slot owns one long-lived Ray actor (:class:`~opbench.run.ray_node.NodeWorkers`,
one GPU or one CPU of a node) that keeps an ordinary
:class:`~opbench.run.pool.WorkerFactory` warm (its fork
server template and spares) for the whole run, and the slot talks to the actor's
worker through :class:`RemoteWorker`, which has the interface of a
:class:`~opbench.run.pool.WorkerProcess`. So isolation, the sandbox, timeouts, the
memory limit, the crash budget, planning, expectations and judging are one code path
for both executors, and the two cannot disagree.

Neither the actors nor this process import candidate code: the actor starts worker
processes and relays their raw reports. A kernel directory backend is shipped to the
nodes through the object store (its files, not a path), so a cluster needs no shared
file system; opbench itself (and torch) must be installed on every node.
``--ray-address`` connects to an existing cluster (``ray://HOST:10001`` or
``HOST:6379``); without it a local Ray is started, or the one already initialised in
this process is used.

The run connects to Ray and starts every slot's actor (and has it warm its factory)
while the harness still builds the suite and scans the kernels (:meth:`RayExecutor.start`);
a slot takes one of those, waiting for it if it is still coming up, and makes its own
only when none is.

A node (or actor) that dies is a harness error for the chunk it was running, never the
kernel's fault: its unrecorded tests are noted for the summary (``--resume`` runs them),
the slot gets a new actor wherever Ray can place one, and the run goes on.

Inputs are drawn on the CPU. Draws once differed in the last bit with the number of
torch threads (``exp2`` vectorised with a scalar tail per intra-op chunk), and Ray starts
its actors with ``OMP_NUM_THREADS=1``: aten's own ``minimum.default`` was judged
``mutates_input`` (issue #35). Draws are now the same for any thread count
(:func:`opbench.suites.input_call._exp2`), and the harness and the workers still use the
same thread count (:func:`_threads`), as in a local run.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from typing import Any

from opbench.run.executor import ExecutionOptions, LocalExecutor, with_hidden_run_dir
from opbench.run.isolation import IsolationPlanner
from opbench.run.pool import Outcome, WorkerConfig, WorkerStartError
from opbench.run.ray_node import NodeWorkers, pack_kernel_dir
from opbench.run.store import ResultStore, TestResult
from opbench.run.worker_process import read_result
from opbench.suites.case import Case

log = logging.getLogger(__name__)

#: Seconds a slot waits for Ray to place and start its actor (a node may have to join).
ACTOR_START_S = float(os.environ.get("OPBENCH_RAY_ACTOR_START_S", "180"))
#: Seconds beyond a call's own limit (the test timeout, a worker's start) before the
#: actor is taken for lost: the actor enforces the limit itself and answers soon after.
CALL_MARGIN_S = 60.0


class NodeLostError(RuntimeError):
    """A slot's Ray actor (or its node) died or stopped answering: not the kernel's fault."""


class RemoteWorker:
    """A worker process inside a slot's actor, seen through the interface of a
    :class:`~opbench.run.pool.WorkerProcess` (what :class:`LocalExecutor` uses of it).
    A dead or silent actor raises :class:`NodeLostError`."""

    def __init__(self, slot: _Slot, got: dict[str, Any]) -> None:
        self._slot = slot
        self.name: str = got["name"]
        self.sandbox_level: str | None = got.get("sandbox_level")
        self.preload_unit = _unit(got.get("preload_unit"))
        self.preload_result: dict[str, Any] | None = got.get("preload_result")
        self.unit = _unit(got.get("unit"))
        self.loaded_info: dict[str, Any] | None = got.get("loaded_info")
        self._ended = False

    def load(self, unit: tuple[str, ...] | None) -> dict[str, Any]:
        info = self._slot.call("load", self.name, unit, timeout=self._slot.start_s)
        if "start_error" in info:
            raise WorkerStartError(info["start_error"])
        if info.get("type") != "load_failed":
            self.unit = unit
            self.loaded_info = info
        return info

    def run_case(
        self,
        case_dict: dict[str, Any],
        timeout_s: float,
        plan: dict[str, Any] | None = None,
        *,
        raw: bool = False,
    ) -> Outcome:
        """As a local worker's; ``raw``: a result unread in ``Outcome.raw`` (a slot's
        judging process reads it, :class:`~opbench.run.slot_judge.SlotJudge`)."""
        o = self._slot.call("run_case", self.name, case_dict, timeout_s, plan,
                            timeout=timeout_s + CALL_MARGIN_S)  # fmt: skip
        tail = o.get("stderr_tail", "")
        if o["kind"] != "result":
            return Outcome(o["kind"], None, o.get("detail", ""), tail)
        if raw:
            return Outcome("result", stderr_tail=tail, raw=o["message"])
        out = read_result(o["message"], tail)
        if out.kind == "crash":  # the actor relays the answer unread: killed from here
            self.kill()
        return out

    def alive(self) -> bool:
        """Not ended here. Asking the actor cost a Ray round trip before every test; a
        worker that died since its last answer answers the next test ``gone`` instead
        (the actor sends it nothing), and the executor replaces it as it would here."""
        return not self._ended

    def _end(self, how: str) -> None:
        if not self._ended:
            self._ended = True
            self._slot.tell("end", self.name, how)

    def retire(self) -> None:
        self._end("retire")

    def stop(self) -> None:
        self._end("stop")

    def kill(self) -> None:
        self._end("kill")


def _unit(u: Any) -> tuple[str, ...] | None:
    return tuple(u) if u is not None else None


class _Slot:
    """One harness slot's actor (made on first use, replaced when it dies)."""

    def __init__(self, factory: RayWorkerFactory) -> None:
        self.factory = factory
        self.actor: Any = None
        self.info: dict[str, Any] = {}
        self.start_s = factory.config.startup_timeout_s + CALL_MARGIN_S

    def ensure(self) -> None:
        if self.actor is not None:
            return
        started = self.factory.take_started()
        if started is not None:  # made while the harness built the suite
            self.actor, self.info = started
            return
        if self.factory.closed:
            raise WorkerStartError("the run is ending: no new Ray actor")
        ray = self.factory.ray
        actor = self.factory.actor_class.remote(self.factory.config_plain, self.factory.files)
        try:
            self.info = ray.get(actor.ready.remote(), timeout=ACTOR_START_S)
        except Exception as e:
            ray.kill(actor)
            raise WorkerStartError(
                f"no Ray node took a slot within {ACTOR_START_S:g} s "
                f"({type(e).__name__}: {e}); OPBENCH_RAY_ACTOR_START_S sets the wait"
            ) from None
        self.actor = actor
        self.factory.note_actor(self.info)

    def call(self, method: str, *args: Any, timeout: float | None = None) -> Any:
        self.ensure()
        ray = self.factory.ray
        actor = self.actor
        try:
            return ray.get(getattr(actor, method).remote(*args), timeout=timeout)
        except Exception as e:
            if isinstance(e, ray.exceptions.RayTaskError):
                raise  # our own code failed inside the actor: a harness error as it is
            self.lost(e)
            raise NodeLostError(
                f"the Ray actor on {self.info.get('node', '?')} was lost during {method} "
                f"({type(e).__name__}: {str(e)[:300]})"
            ) from None

    def tell(self, method: str, *args: Any) -> None:
        """A call nobody waits for (ordered before this slot's next call)."""
        if self.actor is not None:
            getattr(self.actor, method).remote(*args)

    def lost(self, why: Exception) -> None:
        log.warning("ray: slot actor on %s lost (%s); the slot starts a new one",
                    self.info.get("node", "?"), why)  # fmt: skip
        if self.actor is not None:
            try:
                self.factory.ray.kill(self.actor)
            except Exception as e:  # noqa: BLE001 - it is gone either way
                log.debug("ray.kill: %s", e)
        self.actor = None

    def begin_close(self) -> Any:
        """Ask the actor to stop its workers and factory; :meth:`end_close` takes the
        answer (the factory asks every slot's actor first, then waits: they close at
        once, not one after another)."""
        return None if self.actor is None else self.actor.close.remote()

    def end_close(self, closing: Any) -> dict[str, Any] | None:
        """The backend settings the actor's workers read (:meth:`begin_close`'s answer);
        the actor is killed either way."""
        if self.actor is None or closing is None:
            return None
        try:
            return self.factory.ray.get(closing, timeout=CALL_MARGIN_S)
        except Exception as e:  # noqa: BLE001 - closing: keep going
            log.debug("closing a slot actor: %s", e)
            return None
        finally:
            self.factory.ray.kill(self.actor)
            self.actor = None


class RayWorkerFactory:
    """The :class:`~opbench.run.pool.WorkerFactory` interface over Ray actors: each
    harness slot (thread) gets an actor of its own, which keeps its warm factory for the
    whole run; :meth:`get` hands out that actor's next worker as a :class:`RemoteWorker`."""

    spares_enabled = True

    def __init__(self, ray: Any, config: WorkerConfig, kernel_files: Any, *, cuda: bool) -> None:
        self.ray = ray
        self.config = config
        self.config_plain = asdict(config)
        self.files = kernel_files
        self.actor_class = ray.remote(num_gpus=1 if cuda else 0, num_cpus=1, max_restarts=0)(
            NodeWorkers
        )
        self._local = threading.local()
        self._slots: list[_Slot] = []
        self._lock = threading.Lock()
        self.nodes: set[str] = set()
        self.actors: list[dict[str, Any]] = []
        self._settings: list[dict[str, Any]] = []
        self._started: list[tuple[Any, dict[str, Any]]] = []
        self._pending = 0  # actors still being started ahead
        self._closed = False
        self._arrived = threading.Condition(self._lock)

    def expect(self, n: int) -> None:
        """Say that :meth:`start_actors` will make ``n`` actors (before it runs, so a
        slot that asks early waits for one instead of making its own)."""
        with self._lock:
            self._pending += n

    def stop_expecting(self) -> None:
        """No more actors will come from :meth:`start_actors` (it failed)."""
        with self._lock:
            self._pending = 0
            self._arrived.notify_all()

    def start_actors(self, n: int) -> None:
        """Make ``n`` slot actors at once and have each warm its factory; slots take
        them (:meth:`take_started`) as each comes up instead of making their own one
        after another. One that does not come up in time is left out: a slot that finds
        none makes its own as before."""
        actors = [self.actor_class.remote(self.config_plain, self.files) for _ in range(n)]
        for actor in actors:
            actor.warm.remote()  # queued ahead of the slot's first call
        for actor in actors:
            info: dict[str, Any] | None = None
            try:
                info = self.ray.get(actor.ready.remote(), timeout=ACTOR_START_S)
            except Exception as e:  # noqa: BLE001 - the slot will try again itself
                if not self.closed:  # else the run ended first (nothing left to run)
                    log.warning("ray: an actor started ahead did not come up (%s)", e)
            with self._lock:
                keep = info is not None and not self._closed  # else: failed, or run ended
                if keep:
                    self._started.append((actor, info))
                self._pending -= 1
                self._arrived.notify_all()
            if keep:
                self.note_actor(info)
            else:
                self.ray.kill(actor)

    @property
    def closed(self) -> bool:
        with self._lock:
            return self._closed

    def take_started(self) -> tuple[Any, dict[str, Any]] | None:
        """An actor started ahead, waiting for one still coming up; None if none is."""
        with self._lock:
            while not self._started and self._pending > 0:
                self._arrived.wait()
            return self._started.pop(0) if self._started else None

    def _slot(self) -> _Slot:
        slot = getattr(self._local, "slot", None)
        if slot is None:
            slot = self._local.slot = _Slot(self)
            with self._lock:
                self._slots.append(slot)
        return slot

    def note_actor(self, info: dict[str, Any]) -> None:
        with self._lock:
            self.nodes.add(f"{info.get('node', '?')}/{str(info.get('ray_node', '?'))[:12]}")
            self.actors.append(info)

    def get(self, device: str, unit: tuple[str, ...] | None = None) -> RemoteWorker:
        slot = self._slot()
        got = slot.call("get", unit, timeout=slot.start_s)
        if "start_error" in got:
            raise WorkerStartError(got["start_error"])
        return RemoteWorker(slot, got)

    def preload(self, device: str, unit: tuple[str, ...]) -> None:
        self._slot().tell("preload", unit)

    def warm(self, device: str, slots: int = 1) -> None:
        """Nothing: :meth:`start_actors` already has each actor warm its factory."""

    def backend_settings(self) -> dict[str, Any] | None:
        """The settings the first actor's workers read at start, and the last one's at
        the end (the run's record, ``env.backend_settings``)."""
        found = [s for s in self._settings if s]
        if not found:
            return None
        return {"start": found[0]["start"], "end": found[-1]["end"]}

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._pending = 0  # a slot waiting for an actor stops waiting
            self._arrived.notify_all()
            slots, self._slots = self._slots, []
            unused, self._started = self._started, []
        for actor, _ in unused:  # started ahead, never taken by a slot
            try:
                self.ray.kill(actor)
            except Exception as e:  # noqa: BLE001 - it is gone either way
                log.debug("ray.kill: %s", e)
        closing = [(slot, slot.begin_close()) for slot in slots]
        for slot, answer in closing:
            settings = slot.end_close(answer)
            if settings:
                self._settings.append(settings)


def connect_ray(address: str | None, what: str) -> Any:
    """The ``ray`` module, connected: to ``address``, else to this process's Ray or a new
    local one (dashboard off, workers' logs not copied here). ``what`` names the feature
    in the error when Ray is not installed."""
    try:
        import ray
    except ImportError:
        from opbench.run.setup import RunError

        raise RunError(f"{what} needs Ray: pip install 'opbench[ray]'") from None
    if not ray.is_initialized():
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    return ray


def _threads(slots: int) -> int:
    """Torch threads for the harness and every worker: the local executor's share."""
    from opbench.run.setup import cpu_share

    return cpu_share(slots)


class RayExecutor:
    """Runs cases on workers of Ray actors and stores each result as it finishes."""

    def __init__(
        self,
        worker_config: WorkerConfig,
        req: Any,
        store: ResultStore,
        judge_options: Any,
        planner: IsolationPlanner | None = None,
    ) -> None:
        self.planner = planner or IsolationPlanner(
            worker_config.backend, worker_config.kernel_version
        )
        self.req = req
        self.store = store
        self.judge_options = judge_options
        self.config = with_hidden_run_dir(worker_config, store)
        self.sandbox_level: str | None = None
        self.worker_info: dict[str, Any] = {}
        self.nodes: set[str] = set()
        self.slots = 0
        self._started: tuple[int, RayWorkerFactory] | None = None
        self._start_error: BaseException | None = None

    def start(self) -> None:
        """Connect to Ray, then start every slot's actor and warm worker factory in the
        background while the harness builds the suite and scans the kernels: on
        2 x H200 a traces run's Ray start (``ray.init``, actors importing torch,
        templates) was most of its 17 s over local workers. The slots of :meth:`run` take
        the actors as they come up.

        ``ray.init`` itself stays in the calling thread: a local Ray's processes are
        started with a parent-death signal, which Linux sends when the *thread* that
        started them exits (a Ray started from a short-lived thread died mid-run)."""
        try:
            self._started = self._prepare()
        except BaseException as e:  # noqa: BLE001 - run() raises it in the caller
            self._start_error = e
            return
        slots, factory = self._started
        factory.expect(slots)
        threading.Thread(
            target=self._start_actors, args=(factory, slots), name="ray-start", daemon=True
        ).start()

    def _start_actors(self, factory: RayWorkerFactory, slots: int) -> None:
        try:
            factory.start_actors(slots)
        except BaseException as e:  # noqa: BLE001 - slots then make their own actors
            if factory.closed:  # the run ended first (nothing left to run): Ray is going
                log.debug("ray: actors started ahead, run over: %r", e)
            else:
                log.warning("ray: starting the slot actors ahead failed (%r)", e)
            factory.stop_expecting()

    def _prepare(self) -> tuple[int, RayWorkerFactory]:
        """The slot count and the factory of slot actors (which holds Ray and the
        workers' config)."""
        ray = self._connect()
        slots = self._slots(ray)
        config = replace(self.config, threads=_threads(slots))
        kernel_dir = config.backend_path()
        files = ray.put(pack_kernel_dir(kernel_dir)) if kernel_dir else None
        factory = RayWorkerFactory(ray, config, files, cuda=self.req.device.startswith("cuda"))
        return slots, factory

    def close(self) -> None:
        """Release what :meth:`start` made when :meth:`run` is not called (nothing to run,
        or the build failed or was interrupted). Does not wait for actors still coming up
        (a Ctrl-C must not wait for them): the factory, once closed, kills each as it
        arrives."""
        if self._started is not None:
            self._started[1].close()
            self._started = None

    def _connect(self) -> Any:
        return connect_ray(self.req.ray_address, "--executor ray")

    def _slots(self, ray: Any) -> int:
        """``--workers`` slots (0, the default for Ray: one per GPU or CPU of the
        cluster), at most as many as the cluster can hold actors for."""
        key = "GPU" if self.req.device.startswith("cuda") else "CPU"
        have = max(1, int(ray.cluster_resources().get(key, 1)))
        if self.req.workers:
            if self.req.workers > have:
                log.warning("ray: --workers %d but the cluster has %d %s; using %d",
                            self.req.workers, have, key, have)  # fmt: skip
            return min(int(self.req.workers), have)
        return have

    def run(self, cases: Sequence[Case], on_result: Callable[[TestResult], None]) -> None:
        import torch

        from opbench.run.setup import devices_for

        if self._start_error is not None:
            error, self._start_error = self._start_error, None
            raise error
        # the actors may still be coming up: slots wait for them (take_started) while
        # the harness plans their first tests
        started, self._started = self._started, None
        slots, factory = started or self._prepare()
        config = factory.config
        self.slots = slots
        threads = config.threads
        executor = LocalExecutor(
            config,
            ExecutionOptions(
                workers=slots,
                devices=devices_for(self.req.device, slots),
                test_timeout_s=self.req.test_timeout_s,
                max_crashes_per_op=self.req.max_crashes_per_op,
            ),
            self.store,
            self.store.path.parent / "logs",
            self.judge_options,
            self.planner,
            factory=factory,
        )
        log.info("ray: %d tests on %d slots (%d torch threads each)", len(cases), slots, threads)
        threads_before = torch.get_num_threads()
        torch.set_num_threads(threads)  # the harness draws inputs as the workers do
        try:
            executor.run(cases, on_result)
        finally:
            torch.set_num_threads(threads_before)
            factory.close()
            self.nodes = set(factory.nodes)
            self.sandbox_level = executor.sandbox_level
            self.worker_info = dict(executor.worker_info)
            self.worker_info["ray"] = {"nodes": sorted(self.nodes), "actors": len(factory.actors)}
            found = factory.backend_settings()
            if found is not None:
                self.worker_info["backend_settings"] = found
