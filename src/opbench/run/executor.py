"""Local execution: a pool of worker slots pulling cases from one shared queue.

Each slot is a harness thread that owns one worker process at a time (one slot per
GPU, round-robin over the visible devices; N on CPU). It takes a chunk of cases of one
isolation unit, plans each case's trials (the seeds, and the references, computed
here), sends it, waits with a timeout, turns the worker's answer into a verdict with
the trusted judge (in this process, which never imports candidate code), and records
it in the store before the next case, so a slow test only ever holds up its own slot.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from opbench.run.isolation import IsolationPlanner, Unit, chunks
from opbench.run.judge_errors import judge_error_result
from opbench.run.judge_template import plan_where
from opbench.run.outcome_verdict import judge_outcome
from opbench.run.plan_ahead import PlansAhead
from opbench.run.pool import Outcome, WorkerConfig, WorkerFactory
from opbench.run.slot_judge import SlotJudge
from opbench.run.store import ResultStore, TestResult, case_fields
from opbench.run.worker_api import WorkerHandle, WorkerSource
from opbench.run.worker_process import GONE_DETAIL
from opbench.suites.case import Case

log = logging.getLogger(__name__)


#: Harness errors in a row after which a slot stops taking work: one is a race or a
#: bad case; a run of them is a fault that would only burn through the queue.
HARNESS_ERRORS_IN_A_ROW = 2


@dataclass
class _SlotState:
    """One slot's worker and how many tests of its current chunk it recorded."""

    worker: WorkerHandle | None = None
    recorded: int = 0
    #: seconds from the run's start to the slot's first plan, worker and result
    start: dict[str, Any] = field(default_factory=dict)

    def mark(self, what: str, t0: float) -> None:
        """Note when ``what`` first happened (the run's start at ``t0``)."""
        self.start.setdefault(what, round(time.perf_counter() - t0, 2))

    def drop_worker(self) -> None:
        """Kill the worker after a harness error: its pipe may hold a half-read answer."""
        if self.worker is not None:
            try:
                self.worker.kill()
            except Exception as e:  # noqa: BLE001 - already on an error path
                log.debug("killing worker after a harness error: %s", e)
            self.worker = None


def drain(todo: queue.Queue) -> None:
    """Empty a work queue (a worker could not start: the other slots stop too)."""
    while not todo.empty():
        try:
            todo.get_nowait()
        except queue.Empty:
            break


def join_all(threads: Sequence[threading.Thread]) -> None:
    """Wait for every thread in short joins, so that a Ctrl-C still reaches this thread."""
    for t in threads:
        while t.is_alive():
            t.join(0.2)


@dataclass
class ExecutionOptions:
    workers: int = 1
    devices: Sequence[str] = ("cpu",)
    test_timeout_s: float = 120.0
    max_crashes_per_op: int = 3


class CrashBudget:
    """Counts crashes/timeouts per op; past the budget an op's tests are not run."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._counts: Counter[str] = Counter()
        self._kinds: dict[str, Counter[str]] = {}
        self._lock = threading.Lock()

    def record(self, op: str, kind: str) -> None:
        with self._lock:
            self._counts[op] += 1
            self._kinds.setdefault(op, Counter())[kind] += 1

    def history(self, op: str) -> list[str]:
        """The kinds recorded for ``op``, one per crash (to seed another budget with)."""
        with self._lock:
            return list(self._kinds.get(op, Counter()).elements())

    def exhausted(self, op: str) -> tuple[bool, str]:
        with self._lock:
            n = self._counts[op]
            if self.limit > 0 and n >= self.limit:
                kind = self._kinds[op].most_common(1)[0][0]
                return True, kind
        return False, ""


def not_run_result(case: Case, kind: str, limit: int, *, backend: str, device: str) -> TestResult:
    """The record of a test skipped because its op's kernel used up its crash budget."""
    return TestResult(
        status="not_run",
        category=kind,
        message=(
            f"not run: the kernel for {case.op} already failed with {kind} {limit} times "
            "(--max-crashes-per-op)"
        ),
        **case_fields(case, backend=backend, device=device),
    )


def with_hidden_run_dir(config: WorkerConfig, store: ResultStore, *dirs: Path) -> WorkerConfig:
    """``config`` with the results store's folder (and ``dirs``) hidden from sandboxed workers."""
    hide = list(config.hide)
    for d in (store.path.parent, *dirs):
        s = str(Path(d).resolve())
        if s not in hide:
            hide.append(s)
    return replace(config, hide=hide)


class LocalExecutor:
    """Runs cases on local worker processes and stores each result as it finishes.

    Cases go out in chunks of one isolation unit (:mod:`opbench.run.isolation`); a
    slot keeps its worker while the next chunk has the same unit and replaces it
    otherwise, so every worker imports one unit's code only.
    """

    def __init__(
        self,
        config: WorkerConfig,
        options: ExecutionOptions,
        store: ResultStore,
        log_dir: Path,
        judge_options: Any,
        planner: IsolationPlanner | None = None,
        factory: WorkerSource | None = None,
        plans: Callable[[Case, str], Any] | None = None,
    ) -> None:
        """``factory``: a worker factory that outlives this executor (its warm template
        and spares serve many runs, :class:`opbench.agent.scorer.Scorer`); its config
        must already hide ``store``'s folder. None: a factory of this run's own, closed
        when the run ends. ``plans``: ``(case, device) -> (plan, expectations)`` in place
        of :func:`~opbench.judge.evaluate.plan_trials` (the Scorer reuses an operator's
        expectations across candidates)."""
        self.config = with_hidden_run_dir(config, store, log_dir)
        config = self.config
        self.options = options
        self.store = store
        self.judge_options = judge_options
        self._own_factory = factory is None
        self.plan_for = plans
        self.factory: WorkerSource = (
            factory if factory is not None else WorkerFactory(config, log_dir)
        )
        self.budget = CrashBudget(options.max_crashes_per_op)
        self.planner = planner or IsolationPlanner(config.backend, config.kernel_version)
        self.worker_info: dict[str, Any] = {}
        self.sandbox_level: str | None = None
        self.workers_started = 0
        self._error: BaseException | None = None
        self._lock = threading.Lock()
        #: tests this run recorded, and what harness errors left undone (see ``_slot``)
        self.recorded = 0
        self.unfinished: list[dict[str, Any]] = []
        self._first_harness_error: Exception | None = None
        self._stopping = threading.Event()
        self._t0 = time.perf_counter()
        self._t0_unix = time.time()
        #: per slot, seconds from the run's start to its first plan, its first worker
        #: ready with the unit loaded, and its first result (where a run's start goes)
        self.slots_start: list[dict[str, Any]] = []
        #: judging processes started ahead of the run (:meth:`prestart`), per device
        self._ready_judges: dict[str, list[SlotJudge]] = {}
        self._judges_starting: threading.Thread | None = None
        self._warmed = False

    def _slot_devices(self) -> list[str]:
        """Each slot's device, slots spread over the devices in turn."""
        devices = list(self.options.devices) or ["cpu"]
        return [devices[i % len(devices)] for i in range(max(1, self.options.workers))]

    def prestart(self, warm: tuple[str, ...] = ()) -> None:
        """Start the slots' workers and judging processes now, while the caller builds
        the suite, instead of at :meth:`run`: on a GPU a judging process takes torch, a
        CUDA context and (``warm``: modules it imports as it starts) the OpInfo database
        before its first plan, 7.3-9.6 s of every run on 4 x H200 (2026-11-28,
        ``scaling-opinfo-h200x4-alldtypes-2026-11-28.md``), which no number of GPUs
        divides (now forks of :mod:`~opbench.run.judge_template`'s template, which
        ``opbench run`` starts before its own imports). :meth:`release` ends what a run
        never used.

        Only where the slots judge in processes (:func:`plan_where`: a GPU's default): on
        the 2-core CPU, the workers' and a judging process's start beside the suite's build
        slowed the build from 2.8 to 8.7 s and the run's wall time from 13.1 to 16.3 s
        (``benchmarks/probes/first_plan.py``, 2026-11-28, CI running beside it), so the CPU
        starts them at :meth:`run`, as before."""
        slot_devices = self._slot_devices()
        if self.plan_for is not None or all(plan_where(d) != "process" for d in slot_devices):
            return
        for device, slots in Counter(slot_devices).items():
            self.factory.warm(device, slots)
        self._warmed = True

        def start_judges() -> None:
            for device in slot_devices:
                if plan_where(device) == "process":
                    judge = self._new_judge(device, warm)
                    with self._lock:
                        self._ready_judges.setdefault(device, []).append(judge)

        # on a thread: a fork of the judging template waits for the template's imports,
        # which the suite's build need not
        self._judges_starting = threading.Thread(target=start_judges, daemon=True)
        self._judges_starting.start()

    def _judges_started(self) -> None:
        """Wait for :meth:`prestart`'s judging processes (their starts, not their imports)."""
        starting = self._judges_starting
        if starting is not None:
            starting.join()

    def release(self) -> None:
        """Close the judging processes :meth:`prestart` started that no slot took, and
        this run's own worker factory if :meth:`run` never ran (it closes it itself)."""
        self._judges_started()
        for judges in self._ready_judges.values():
            for judge in judges:
                judge.close()
        self._ready_judges.clear()
        if self._warmed and self._own_factory:
            self.factory.close()
            self._warmed = False

    def run(self, cases: Sequence[Case], on_result: Callable[[TestResult], None]) -> None:
        todo: queue.Queue[tuple[Unit, list[Case]]] = queue.Queue()
        for item in chunks(cases, self.planner, max(1, self.options.workers)):
            todo.put(item)
        slot_devices = self._slot_devices()
        self._t0 = time.perf_counter()
        self._t0_unix = time.time()
        if not self._warmed:  # workers start beside the first plans
            for device, slots in Counter(slot_devices).items():
                self.factory.warm(device, slots)
        self._warmed = False  # the run's end closes the factory
        threads = [
            threading.Thread(target=self._slot, args=(device, todo, on_result), daemon=True)
            for device in slot_devices
        ]
        for t in threads:
            t.start()
        try:
            join_all(threads)
        except BaseException:
            # interrupted (Ctrl-C): slots take no further chunk; what they record until
            # the process ends is kept, and --resume runs the rest
            self._stopping.set()
            raise
        finally:
            if self._own_factory:
                self.factory.close()
            self.release()  # judging processes started ahead that no slot took
            self.worker_info = {"load_errors": dict(self.planner.load_errors)}
            self.worker_info["slots_start_s"] = list(self.slots_start)
            found = self.factory.backend_settings()
            if found is not None:
                self.worker_info["backend_settings"] = found
        if self._error is not None:
            raise self._error
        self._note_left_over(todo)
        if self.unfinished:
            if self.recorded == 0 and self._first_harness_error is not None:
                raise self._first_harness_error  # nothing could be done: say why, as before
            self.worker_info["unfinished"] = list(self.unfinished)

    def _note_left_over(self, todo: queue.Queue) -> None:
        """Chunks no slot took because every slot stopped after harness errors."""
        while True:
            try:
                _, group = todo.get_nowait()
            except queue.Empty:
                return
            self.unfinished.append(
                {
                    "ops": sorted({c.op for c in group}),
                    "tests": len(group),
                    "error": "not started: every slot stopped after harness errors",
                }
            )

    def _worker_for(self, device: str, unit: Unit, current: WorkerHandle | None) -> Any:
        """A live worker that has loaded ``unit``: ``current`` if it has, else a fresh one
        (``current`` is stopped). Returns the worker, or the load failure's dict."""
        if current is not None and current.alive() and current.loaded_info is not None:
            if current.unit == unit:
                return current
        if current is not None:
            current.retire()
        worker = self.factory.get(device, unit)
        self.workers_started += 1
        self.sandbox_level = worker.sandbox_level
        info = worker.preload_result if worker.preload_unit == unit else None
        if info is None:
            info = worker.load(unit)
        if info.get("type") == "load_failed":
            return info
        self.planner.note_loaded(info)
        return worker

    def _slot(
        self, device: str, todo: queue.Queue, on_result: Callable[[TestResult], None]
    ) -> None:
        """Take chunks until the queue is empty. A harness error while judging a chunk
        (a bug or a race of ours, never the kernel's: those are outcomes) ends that
        chunk only: its worker is killed, its unrecorded tests are noted for the summary
        (``--resume`` runs them) and the slot goes on with a fresh worker, so one error
        never ends a run the other slots can finish. A slot that meets
        :data:`HARNESS_ERRORS_IN_A_ROW` in a row stops (the fault is not passing)."""
        slot = _SlotState(start={"device": device})
        with self._lock:
            self.slots_start.append(slot.start)
        plans: PlansAhead | SlotJudge | None = None
        in_a_row = 0
        try:
            plans = self._plans(device)
            if not isinstance(plans, SlotJudge):  # judged here: on this slot's GPU
                from opbench.instrument.tensors import bind_device

                # (in a judging process of its own the harness needs no CUDA context:
                # one a slot cost the start a context each, which a host makes in turn)
                bind_device(device)
            while not self._stopping.is_set():
                try:
                    unit, group = todo.get_nowait()
                except queue.Empty:
                    break
                slot.recorded = 0
                try:
                    self._run_group(device, unit, group, slot, plans, todo, on_result)
                    in_a_row = 0
                except Exception as e:  # noqa: BLE001 - noted, and the run goes on
                    slot.drop_worker()
                    self._note_unfinished(unit, group[slot.recorded :], e, device)
                    in_a_row += 1
                    if in_a_row >= HARNESS_ERRORS_IN_A_ROW:
                        log.error("slot on %s stops after %d harness errors in a row", device,
                                  in_a_row)  # fmt: skip
                        break
        except BaseException as e:  # noqa: BLE001 - surface in the main thread
            self._error = e
        finally:
            if isinstance(plans, SlotJudge):
                report = plans.start_report(self._t0_unix)
                if report is not None:
                    slot.start["judge"] = report
            if plans is not None:
                plans.close()
            if slot.worker is not None:
                slot.worker.stop()

    def _plans(self, device: str) -> PlansAhead | SlotJudge:
        """The slot's planning: :func:`~opbench.judge.evaluate.plan_trials` on harness
        threads (and judging on the slot's thread), or both in a process of the slot's
        own (by default on a GPU, :func:`~opbench.run.judge_template.plan_where`;
        :class:`~opbench.run.slot_judge.SlotJudge`,
        with a worker's share of the CPU's threads for torch); a ``plans`` function given
        to the executor (the Scorer's) always runs on threads."""
        from opbench.judge.evaluate import plan_trials

        ahead = not self.config.perf
        if self.plan_for is None and plan_where(device) == "process":
            self._judges_started()
            with self._lock:
                ready = self._ready_judges.get(device)
                if ready:
                    return ready.pop()
            return self._new_judge(device)
        plan_for = self.plan_for or (lambda c, d: plan_trials(c, d, self.judge_options))
        return PlansAhead(lambda case: plan_for(case, device), device, ahead=ahead)

    def _new_judge(self, device: str, warm: tuple[str, ...] = ()) -> SlotJudge:
        """A slot's judging processes on ``device``, with a worker's share of the cores."""
        from opbench.run.setup import cpu_share

        threads = cpu_share(max(1, self.options.workers))
        return SlotJudge(device, self.judge_options, ahead=not self.config.perf,
                         threads=threads, warm=warm)  # fmt: skip

    def _run_group(
        self,
        device: str,
        unit: Unit,
        group: list[Case],
        slot: _SlotState,
        plans: PlansAhead | SlotJudge,
        todo: queue.Queue,
        on_result: Callable[[TestResult], None],
    ) -> None:
        """Judge and record one chunk's tests in turn (``slot.recorded`` counts them). A
        test whose planning or judging raises is recorded as its ``judge_error``
        (:mod:`opbench.run.judge_errors`) and the chunk goes on."""
        backend = self.config.backend
        for i, case in enumerate(group):
            result = self._without_worker(case, unit, device)
            started = time.perf_counter()
            if result is None:
                try:
                    plan, expectations = plans.get(case)
                    slot.mark("plan_s", self._t0)
                except Exception as e:  # opbench's own failure: this test's judge_error
                    result = judge_error_result(case, e, "plan", backend=backend, device=device)
                    result.duration_s = time.perf_counter() - started
                if i + 1 < len(group):
                    plans.ahead(group[i + 1 : i + 1 + plans.depth])
            if result is None:
                outcome = self._outcome(device, unit, case, plan, slot, todo,
                                        raw=isinstance(plans, SlotJudge))  # fmt: skip
                worker = slot.worker
                name = worker.name if worker else ""
                fields = {
                    "backend": backend,
                    "worker": name,
                    "unit_info": worker.loaded_info if worker else None,
                    "scan": self.planner.scan(unit),
                }
                kind = outcome.kind
                try:
                    if isinstance(plans, SlotJudge):  # the answer is read over there
                        result, kind = plans.judge(case, outcome, **fields)
                        if kind != outcome.kind and worker is not None:
                            worker.kill()  # unreadable, or its CUDA context is broken
                    else:
                        result = judge_outcome(
                            case,
                            outcome,
                            device=device,
                            judge_options=self.judge_options,
                            expectations=expectations,
                            **fields,
                        )
                except Exception as e:  # opbench's own failure: this test's judge_error
                    result = judge_error_result(
                        case, e, "judge", backend=backend, device=device, worker=name
                    )
                if kind in ("crash", "timeout", "oom"):
                    self.budget.record(case.op, kind)
                    slot.worker = None
                if result.duration_s is None:
                    result.duration_s = time.perf_counter() - started
            self.store.add(result)
            slot.mark("result_s", self._t0)
            slot.recorded += 1
            with self._lock:
                self.recorded += 1
            on_result(result)

    def _outcome(
        self,
        device: str,
        unit: Unit,
        case: Case,
        plan: Any,
        slot: _SlotState,
        todo: queue.Queue,
        *,
        raw: bool,
    ) -> Outcome:
        """The worker's outcome of ``case`` on the slot's worker (a new one where it has
        none for ``unit``). ``raw``: a result unread, for the judging process. A worker
        that exited after its last answer answers ``gone``: it is replaced and the test
        sent to the new one, as a worker found dead before the test is (through Ray,
        asking whether it lives cost a round trip a test). Twice gone is a crash."""
        for _ in range(2):
            got = self._worker_for(device, unit, slot.worker)
            if isinstance(got, dict):  # importing the unit killed the worker
                failed: dict[str, Any] = got
                slot.worker = None
                # the crash budget counts it once, where the test's crash is recorded
                # (_run_group); counting it here too stopped an op after half its budget
                return Outcome(
                    failed["kind"],
                    detail=f"the worker died importing the kernel: {failed['detail']}",
                    stderr_tail=failed.get("stderr_tail", ""),
                )
            slot.mark("worker_s", self._t0)
            if got is not slot.worker and not self.config.perf:
                self._preload_next(device, todo)
            slot.worker = got
            outcome = got.run_case(
                case.to_dict(), self.options.test_timeout_s, plan.to_dict(), raw=raw
            )
            if outcome.kind != "gone":
                return outcome
            got.kill()  # already exited: forget it
            slot.worker = None
        return Outcome("crash", detail=f"{GONE_DETAIL}, twice in a row",
                       stderr_tail=outcome.stderr_tail)  # fmt: skip

    def _note_unfinished(
        self, unit: Unit, cases: Sequence[Case], e: Exception, device: str
    ) -> None:
        """Log a harness error and keep what it left undone (its tests stay unrecorded)."""
        error = f"{type(e).__name__}: {e}".strip()
        log.error(
            "harness error on %s while judging %s: %s; %d test(s) not recorded "
            "(run again with --resume to finish them)",
            device, "/".join(unit or ("the backend",)), error, len(cases),
            exc_info=e,
        )  # fmt: skip
        with self._lock:
            if self._first_harness_error is None:
                self._first_harness_error = e
            if cases:
                self.unfinished.append(
                    {"ops": sorted({c.op for c in cases}), "tests": len(cases), "error": error}
                )

    def _preload_next(self, device: str, todo: queue.Queue) -> None:
        """Let the spare import the unit queued next while this one runs (another slot
        may take that unit first; the spare is then discarded, never reused)."""
        with todo.mutex:
            nxt = todo.queue[0] if todo.queue else None
        if nxt is not None and self.factory.spares_enabled:
            self.factory.preload(device, nxt[0])

    def _without_worker(self, case: Case, unit: Unit, device: str) -> TestResult | None:
        """The result of a case no worker runs: past its op's crash budget, no kernel,
        or a unit the static scan blocked."""
        exhausted, kind = self.budget.exhausted(case.op)
        if exhausted:
            return not_run_result(
                case, kind, self.budget.limit, backend=self.config.backend, device=device
            )
        return self.planner.result_without_worker(
            case, unit, backend=self.config.backend, device=device
        )
