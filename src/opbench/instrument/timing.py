"""Timing a candidate against the reference: two times, never mixed, that cannot be fooled.

*Device time* (CUDA): one call between two device events, the L2 cache flushed before
every repetition, medians over many repetitions. *Host-inclusive time*: wall clock over
many back-to-back calls ending in one device-wide synchronize, what an eager-mode model
pays when the CPU is the bottleneck. Optionally a third, CUDA-graph replay.

How the protocol keeps aten-vs-aten at 1.00 (each point answers a way timings lie):

* **Interleaved**: reference and candidate alternate call by call (A B A B ...) in one
  process, so clock, power and thermal drift hit both alike.
* **Same inputs, same addresses**: :func:`time_pair` calls ``make_args()`` once and
  keeps that as a pristine *template*. Both sides run on layout-exact copies of it
  (same strides, offsets, stride-0 and aliasing between arguments). Ops that write to
  an input (schema ``a!`` or, for any callable, an input seen to change) get a fresh
  copy before every repetition, made before the flush so neither the copy nor its cache
  footprint is timed; in-place ops never drift. Outputs are dropped right after each
  call, so the caching allocator hands both sides the same blocks.
* **No answer to remember**: each repetition holds one of two draws of the case, chosen
  at random, rewritten into the same tensors (objects, addresses and version counters
  unchanged) before the flush; host-inclusive rounds give every call its own copy. A
  kernel that returns the answer it gave for the same objects is wrong on the other
  draw, and the harness judges two kept timed outputs against the draw each one saw
  (:mod:`opbench.instrument.timing_inputs`).
* **Cold L2, no host in the interval**: before every repetition a buffer of 4x the L2
  size (read from the device) is overwritten, then a spin kernel (``torch.cuda._sleep``,
  sized from the measured host launch time) keeps the GPU busy until the host has
  queued the start event and the call. The events then bracket only device work: host
  jitter, Python overhead and the flush's tail never leak into device time. The
  persisting-L2 limit is reset to 0 where the CUDA runtime can be reached.
* **Robust statistics**: warm-up by time; repetitions in batches until the relative
  standard error of both medians meets ``rel_err_target`` or the budget runs out;
  the median is interpolated within tied groups (CUDA events tick at ~0.5 us), so two
  equal distributions give equal medians instead of adjacent ticks.
* **Side streams**: the stop event is recorded normally (a device-wide synchronize in
  the interval would inflate small ops). Work left on another stream is caught by
  timing the same calls once more on an idle GPU with both events and a synchronised
  wall clock: for honest work ``wall - event`` is a constant (start latency + sync
  latency) independent of the op, so the candidate's excess over the reference's is
  work finishing after its stop event. A suspect is flagged, and its device speedup
  becomes the smaller of the event ratio and a ratio of *synced* times (device-wide
  synchronize before the stop event, both sides measured alike).
* **Captured timers**: ``time.perf_counter_ns``, ``torch.cuda.Event`` and its methods,
  ``current_stream`` and ``synchronize`` are bound at import
  (:mod:`opbench.instrument.clocks`); a candidate imported later that patches ``time``
  or ``torch.cuda`` does not change the harness's clock.

The CPU path runs the same protocol with ``perf_counter_ns`` around each call (no
flush), labelled ``"timer": "cpu-wall"``, so the pipeline runs in CI.

This module owns the entry points (:func:`time_pair`, :func:`time_graph_pair`,
:func:`measure_launch_floor`), the order of the phases and the result,
:class:`PairTiming`. The pieces: :mod:`opbench.instrument.timing_stats` (options and
statistics), :mod:`opbench.instrument.cuda_env` (flush, sleep, persisting L2),
:mod:`opbench.instrument.timing_loops` (the loops of each phase) and
:mod:`opbench.instrument.timing_inputs` (the inputs each call holds).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import torch

from opbench.instrument.clocks import NS_PER_MS as _NS_PER_MS
from opbench.instrument.clocks import current_stream as _current_stream
from opbench.instrument.clocks import perf_ns as _perf_ns
from opbench.instrument.cuda_env import env_for, reset_persisting_l2, sleep_cycles
from opbench.instrument.timing_inputs import TimingInputs, clone_inputs, schema_writes
from opbench.instrument.timing_loops import (
    Side,
    Timer,
    balanced_batch,
    device_batch_cpu,
    device_batch_cuda,
    first_call,
    graph_times,
    host_rounds,
    last_calls,
    side_stream_check,
    synced_times,
    unwatched,
)
from opbench.instrument.timing_stats import (
    Summary,
    TimingOptions,
    interpolated_median,
    summarize,
)

__all__ = [
    "PairTiming",
    "Summary",
    "TimingOptions",
    "clone_inputs",
    "interpolated_median",
    "measure_launch_floor",
    "summarize",
    "reset_persisting_l2",
    "time_graph_pair",
    "time_pair",
]


# --------------------------------------------------------------------------- the result


@dataclass
class PairTiming:
    """The timing of one test, reference against candidate. All times in ms.

    Measurements only: the worker sends these fields, and the harness derives the
    speedups and flags from them (:func:`opbench.judge.timing_rules.derive`; the
    properties below call it for in-process callers such as the self-test).
    ``spread`` is the larger relative IQR of the two device-time samples;
    ``speedup_rel_err`` the 1-sigma relative error of the ratio of the two medians;
    ``*_device_rel_se`` each median's relative standard error, ``rel_err_target`` the
    one the batches aimed for; ``inputs_changed``: the shared inputs changed though no
    side declared a write (seen after the last calls).
    """

    timer: str
    device: str
    ref_device_ms: float
    cand_device_ms: float
    ref_device_iqr_ms: float
    cand_device_iqr_ms: float
    ref_host_ms: float
    cand_host_ms: float
    ref_host_rel_iqr: float
    cand_host_rel_iqr: float
    ref_device_rel_se: float
    cand_device_rel_se: float
    rel_err_target: float
    spread: float
    speedup_rel_err: float
    reps: int
    host_calls: int
    host_rounds: int
    launch_floor_ms: float
    ref_graph_ms: float | None = None
    cand_graph_ms: float | None = None
    graph_note: str | None = None
    side_stream: dict[str, float] | None = None
    synced: dict[str, float] | None = None
    ref_peak_mem_bytes: int | None = None
    cand_peak_mem_bytes: int | None = None
    ref_first_call_ms: float = 0.0
    cand_first_call_ms: float = 0.0
    mutating: bool = False
    inputs_changed: bool = False
    input_draws: int = 1
    input_draws_note: str | None = None
    sleep_us: float = 0.0
    flush_bytes: int = 0
    persisting_l2: str = "n/a"
    elapsed_ms: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    # What the harness derives from these measurements, for in-process callers (the
    # self-test, benchmarks); a worker sends the fields above and never calls these.
    def derived(self) -> dict[str, Any]:
        from opbench.judge.timing_rules import derive

        return derive(self.to_dict())

    # One read-only property per derived number (the same two lines each): callers name
    # the number they want rather than index ``derived()`` themselves.
    @property
    def speedup_device(self) -> float | None:
        return self.derived()["speedup_device"]

    @property
    def event_speedup_device(self) -> float | None:
        return self.derived()["event_speedup_device"]

    @property
    def speedup_host(self) -> float | None:
        return self.derived()["speedup_host"]

    @property
    def speedup_graph(self) -> float | None:
        return self.derived()["speedup_graph"]

    @property
    def flags(self) -> list[str]:
        return self.derived()["flags"]


# --------------------------------------------------------------------------- launch floor

_FLOOR: dict[str, float] = {}


def measure_launch_floor(device: str | torch.device, reps: int = 200) -> float:
    """The time of ``torch.empty(0)`` between two events (ms), median, cached per process.

    ``torch.empty(0)`` launches no kernel: this is the floor of the device-time protocol
    (the same flush and sleep as :func:`time_pair`), and the published rule flags tests
    within 1.3x of it as overhead-dominated. On CPU: the wall-clock floor of the call.
    """
    dev = torch.device(device)
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    key = str(dev)
    if key in _FLOOR:
        return _FLOOR[key]

    def empty() -> torch.Tensor:
        return torch.empty(0, device=dev)

    sides = [Side("floor", empty)]
    inputs = TimingInputs(([], {}), mutating=False)
    if dev.type == "cuda":
        with torch.cuda.device(dev):
            env = env_for(dev)
            stream = _current_stream(dev)
            device_batch_cuda(sides, inputs, 20, env, stream, True, sleep_cycles(env, 20.0))
            samples = device_batch_cuda(
                sides, inputs, reps, env, stream, True, sleep_cycles(env, 20.0)
            )[0]
    else:
        device_batch_cpu(sides, inputs, 50)
        samples = device_batch_cpu(sides, inputs, reps)[0]
    floor = interpolated_median(samples)
    _FLOOR[key] = floor
    return floor


# --------------------------------------------------------------------------- the entry points


def time_graph_pair(
    ref: Callable[..., Any],
    cand: Callable[..., Any],
    make_args: Callable[[], tuple[list[Any], dict[str, Any]]],
    device: str | torch.device,
    options: TimingOptions | None = None,
    per_call_ms: float = 0.01,
) -> dict[str, Any]:
    """Only the CUDA-graph replay times: ``{"ref_ms", "cand_ms", "speedup", "note"}``.

    For a separate pass after the main timing (capturing can fail in ways that are
    best kept away from the other measurements). ``per_call_ms`` sizes the rounds.
    """
    opt = options or TimingOptions()
    dev = torch.device(device)
    if dev.type != "cuda":
        return {"ref_ms": None, "cand_ms": None, "speedup": None, "note": "CUDA only"}
    if dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    with torch.cuda.device(dev):
        args, kwargs = make_args()
        inputs = TimingInputs((list(args), dict(kwargs)), mutating=schema_writes(ref))
        timer = Timer(dev, opt)
        ms, note = graph_times([Side("ref", ref), Side("cand", cand)], inputs, timer, per_call_ms)
    if ms is None:
        return {"ref_ms": None, "cand_ms": None, "speedup": None, "note": note}
    return {
        "ref_ms": ms[0],
        "cand_ms": ms[1],
        "speedup": ms[0] / ms[1] if ms[1] > 0 else None,
        "note": None,
    }


def time_pair(
    ref: Callable[..., Any],
    cand: Callable[..., Any],
    make_args: Callable[[], tuple[list[Any], dict[str, Any]]],
    device: str | torch.device,
    options: TimingOptions | None = None,
    *,
    observer_pause: Callable[[], Any] | None = None,
    alternate_args: Callable[[], tuple[list[Any], dict[str, Any]]] | None = None,
    inputs_ready: Callable[[TimingInputs], Any] | None = None,
    reference_window: Callable[[], contextlib.AbstractContextManager[None]] | None = None,
    look: Callable[[], Any] | None = None,
) -> PairTiming:
    """Time ``ref`` against ``cand`` on the inputs ``make_args()`` builds.

    ``make_args`` is called once; both sides then run on layout-exact copies (see the
    module docstring for the protocol). Raises whatever a side raises.

    ``alternate_args``: builds a second draw of the same case; each timed call then holds
    one of the two draws, chosen at random (:mod:`opbench.instrument.timing_inputs`), so no
    kernel can return a remembered answer. ``inputs_ready`` is handed the
    :class:`~opbench.instrument.timing_inputs.TimingInputs` before the first call, for a
    wrapper that records which draw a call saw (``draw_of``).

    ``reference_window``: entered around each stretch of the reference's timed work,
    outside its timed interval (the worker's
    :class:`~opbench.instrument.neighbours.NeighbourWatch`); ``look``: called after every
    batch and round, to note threads and processes the candidate's calls left running.

    ``observer_pause``: a context manager factory that pauses the worker's call
    observer (:class:`opbench.instrument.observer.ExecutionWindow`) where host time is
    measured (the observer costs ~8 us per ATen call): the host-inclusive rounds, the
    side-stream check and graph replays everywhere, and on the CPU every timed loop.
    The first calls, the input-mutation probe and (CUDA) the warm-up and device-time
    batches stay observed: there the flush keeps the GPU busy long enough to hide it.
    """
    opt = options or TimingOptions()
    dev = torch.device(device)
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    started = _perf_ns()
    pause = observer_pause or contextlib.nullcontext
    draws = (alternate_args, inputs_ready)
    watch = (reference_window or unwatched, look or (lambda: None))
    if dev.type == "cuda":
        with torch.cuda.device(dev):
            result = _time_pair(ref, cand, make_args, dev, opt, pause, draws, watch)
    else:
        result = _time_pair(ref, cand, make_args, dev, opt, pause, draws, watch)
    result.elapsed_ms = (_perf_ns() - started) / _NS_PER_MS
    return result


def _time_pair(
    ref: Callable[..., Any],
    cand: Callable[..., Any],
    make_args: Callable[[], tuple[list[Any], dict[str, Any]]],
    dev: torch.device,
    opt: TimingOptions,
    pause: Callable[[], Any] = contextlib.nullcontext,
    draws: tuple[Any, Any] = (None, None),
    watch: tuple[Any, Callable[[], Any]] = (unwatched, lambda: None),
) -> PairTiming:
    floor = measure_launch_floor(dev)
    reference_window, look = watch
    timer = Timer(dev, opt)
    args, kwargs = make_args()
    template = (list(args), dict(kwargs))
    make_alt, inputs_ready = draws
    inputs = TimingInputs(
        template, schema_writes(ref), make_alt, max_alternate_bytes=opt.alternate_max_bytes
    )
    if inputs_ready is not None:
        inputs_ready(inputs)
    sides = [Side("ref", ref, reference_window), Side("cand", cand)]

    # First calls (compile / autotune / lazy init) and peak memory, each on fresh inputs.
    ref_first, ref_peak = first_call(ref, inputs, timer)
    cand_first, cand_peak = first_call(cand, inputs, timer)
    if timer.cuda:
        assert timer.env is not None
        timer.env.persisting_l2 = reset_persisting_l2()  # a candidate may have raised it

    # One call each on the shared copy: does either side write to its inputs?
    # Each side probes alone, so no call ever sees an input another call changed.
    for side in sides:
        if inputs.mutating:
            break
        out = side.fn(*inputs.working[0], **inputs.working[1])
        del out
        timer.sync()
        if inputs.became_dirty():
            inputs.mutating = True
            inputs.reset()

    # On the CPU the timed loops are wall clock: the observer would be inside them.
    paused_cpu = contextlib.ExitStack()
    if not timer.cuda:
        paused_cpu.enter_context(pause())
    # Warm-up by time (interleaved, same protocol), learning the host launch time and
    # the cost of one pair of repetitions.
    # (one draw: no two device-timed calls differ, so the wrapper need not pair them)
    inputs.phase = "device" if len(inputs.draws) > 1 else "other"
    t_start = _perf_ns()
    warm = 1
    while True:
        t_b = _perf_ns()
        timer.batch(sides, inputs, warm, launch_times=True)
        look()
        now = _perf_ns()
        pair_ms = max((now - t_b) / _NS_PER_MS / warm, 1e-4)
        if (now - t_start) / _NS_PER_MS >= opt.warmup_ms:
            break
        warm = int(min(max((opt.warmup_ms - (now - t_start) / _NS_PER_MS) / pair_ms, 1), 10))
    timer.set_sleep_from_launches(sides)

    # Device time: batches until both medians meet the error target, or the budget ends.
    # Slow ops (where min_reps pairs would overrun the budget) get fewer, down to 5.
    min_reps = int(max(5, min(opt.min_reps, opt.budget_ms / pair_ms)))
    t_start = _perf_ns()
    batch = balanced_batch(max(min_reps, 1))
    while True:
        t_b = _perf_ns()
        got = timer.batch(sides, inputs, batch)
        look()
        for side, samples in zip(sides, got):
            side.samples.extend(samples)
        spent = (_perf_ns() - t_start) / _NS_PER_MS
        n = len(sides[0].samples)
        stats = [summarize(s.samples) for s in sides]
        if n >= min_reps and max(st.rel_se for st in stats) <= opt.rel_err_target:
            break
        if spent >= opt.budget_ms or n >= opt.max_reps:
            break
        per_pair_ms = max((_perf_ns() - t_b) / _NS_PER_MS / batch, 1e-4)
        left = min(opt.budget_ms - spent, 25.0)
        batch = balanced_batch(int(min(max(left / per_pair_ms, 5), opt.max_reps - n)))
    ref_st, cand_st = (summarize(s.samples) for s in sides)

    # Host-inclusive time.
    launch_ms = [
        sorted(s.launch_ns)[len(s.launch_ns) // 2] / _NS_PER_MS for s in sides if s.launch_ns
    ]
    per_call = max(ref_st.median, cand_st.median, *launch_ms, 1e-4)
    inputs.phase = "host"
    with pause():
        host, calls, rounds = host_rounds(sides, inputs, timer, per_call)
    inputs.phase = "other"
    look()
    ref_host, cand_host = (summarize(h) for h in host)

    side_info = synced = None
    if timer.cuda and opt.side_stream_check:
        with pause():
            side_info = side_stream_check(sides, inputs, timer)
        # What to measure next, not a verdict: the harness applies its own tolerance
        # (opbench.judge.timing_rules); these probes start at half of it, so it always has
        # the second probe and the synced times when it could flag the candidate.
        probe_us = max(1.5, 0.05 * side_info["ref_event_us"])
        if side_info["delta_us"] > probe_us:
            # a second probe: a one-off host hiccup must not flag an honest kernel
            with pause():
                again = side_stream_check(sides, inputs, timer)
            if again["delta_us"] < side_info["delta_us"]:
                side_info = again
        if side_info["delta_us"] > probe_us:
            with pause():
                s_ref, s_cand = synced_times(sides, inputs, timer, max(opt.min_reps, 10))
            synced = {"ref_ms": s_ref, "cand_ms": s_cand}

    graph_ms: list[float] | None = None
    graph_note = None
    if timer.cuda and opt.cuda_graph:
        with pause():
            graph_ms, graph_note = graph_times(sides, inputs, timer, per_call)

    paused_cpu.close()
    last_calls(sides[1], inputs, timer)
    look()
    inputs_changed = not inputs.mutating and inputs.became_dirty()

    # Like run.outcome_verdict.judge_outcome's TestResult(...), kept apart: another record, same shape
    return PairTiming(
        timer="cuda-event" if timer.cuda else "cpu-wall",
        device=str(dev),
        ref_device_ms=ref_st.median,
        cand_device_ms=cand_st.median,
        ref_device_iqr_ms=ref_st.iqr,
        cand_device_iqr_ms=cand_st.iqr,
        ref_host_ms=ref_host.median,
        cand_host_ms=cand_host.median,
        ref_host_rel_iqr=ref_host.rel_iqr,
        cand_host_rel_iqr=cand_host.rel_iqr,
        ref_device_rel_se=ref_st.rel_se,
        cand_device_rel_se=cand_st.rel_se,
        rel_err_target=opt.rel_err_target,
        spread=max(ref_st.rel_iqr, cand_st.rel_iqr),
        speedup_rel_err=math.hypot(ref_st.rel_se, cand_st.rel_se),
        reps=ref_st.n,
        host_calls=calls,
        host_rounds=rounds,
        launch_floor_ms=floor,
        ref_graph_ms=graph_ms[0] if graph_ms else None,
        cand_graph_ms=graph_ms[1] if graph_ms else None,
        graph_note=graph_note,
        side_stream=side_info,
        synced=synced,
        ref_peak_mem_bytes=ref_peak,
        cand_peak_mem_bytes=cand_peak,
        ref_first_call_ms=ref_first,
        cand_first_call_ms=cand_first,
        mutating=inputs.mutating,
        inputs_changed=inputs_changed,
        input_draws=len(inputs.draws),
        input_draws_note=inputs.note,
        sleep_us=timer.sleep_us,
        flush_bytes=timer.env.flush_bytes if timer.env else 0,
        persisting_l2=timer.env.persisting_l2 if timer.env else "n/a",
    )
