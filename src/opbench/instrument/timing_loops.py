"""The timing loops: interleaved repetitions of reference and candidate, one phase each.

Owns how calls are repeated and clocked, for :func:`opbench.instrument.timing.time_pair`
and :func:`~opbench.instrument.timing.measure_launch_floor`: the Thue-Morse call order
(:func:`rep_order`), the device-time batches (CUDA events around one call after a flush and
a spin kernel, or the wall clock on the CPU), the first calls, the host-inclusive rounds,
the side-stream probe and synced times, CUDA-graph replays and the candidate's last two
calls on the two draws. Each loop returns raw samples; statistics are
:mod:`opbench.instrument.timing_stats`'s, the per-device state
:mod:`opbench.instrument.cuda_env`'s, and every clock is one captured at import
(:mod:`opbench.instrument.clocks`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch

from opbench.instrument.clocks import NS_PER_MS as _NS_PER_MS
from opbench.instrument.clocks import Event as _Event
from opbench.instrument.clocks import cuda_sync as _cuda_sync
from opbench.instrument.clocks import current_stream as _current_stream
from opbench.instrument.clocks import event_elapsed as _ev_elapsed
from opbench.instrument.clocks import event_record as _ev_record
from opbench.instrument.clocks import gc_disable as _gc_disable
from opbench.instrument.clocks import gc_enable as _gc_enable
from opbench.instrument.clocks import gc_isenabled as _gc_isenabled
from opbench.instrument.clocks import perf_ns as _perf_ns
from opbench.instrument.cuda_env import CudaEnv, env_for, sleep_cycles
from opbench.instrument.timing_inputs import TimingInputs
from opbench.instrument.timing_stats import TimingOptions, interpolated_median

__all__ = [
    "Side",
    "Timer",
    "balanced_batch",
    "device_batch_cpu",
    "device_batch_cuda",
    "first_call",
    "graph_times",
    "host_rounds",
    "last_calls",
    "rep_order",
    "side_stream_check",
    "synced_times",
    "unwatched",
]


def unwatched() -> contextlib.AbstractContextManager[None]:
    return contextlib.nullcontext()


class Side:
    """One side of the comparison and what was learnt about it during warm-up.

    ``window``: a context manager factory entered around this side's timed work, outside
    its timed interval (the reference's: :meth:`opbench.instrument.neighbours.
    NeighbourWatch.reference`, which clocks whatever else ran meanwhile)."""

    def __init__(
        self,
        name: str,
        fn: Callable[..., Any],
        window: Callable[[], contextlib.AbstractContextManager[None]] = unwatched,
    ) -> None:
        self.name = name
        self.fn = fn
        self.window = window
        self.samples: list[float] = []
        self.launch_ns: list[int] = []


def balanced_batch(n: int) -> int:
    """``n`` rounded up to a multiple of 8: each batch is then balanced in every call
    index modulo 2, 4 and 8 (Thue-Morse blocks of 8 repetitions)."""
    return max(8, -(-n // 8) * 8)


def rep_order(i: int, k: int) -> range:
    """Side indices for repetition ``i``, in Thue-Morse order: A B, B A, B A, A B, ...

    Forwards when ``i`` has an even number of one bits, else backwards. Measured on an
    H100 (``timing_diag.py``, since removed; docs/results.md, "Settled probes"): one call
    position in every four ran ~10% slow for small ops, whatever ran there, so fixed A B
    order and plain A B / B A alternation both handed that slot to one side. The Thue-Morse sequence gives each side every call
    index modulo 2, 4 and 8 equally often.
    """
    return range(k) if bin(i).count("1") % 2 == 0 else range(k - 1, -1, -1)


def device_batch_cuda(
    sides: list[Side],
    inputs: TimingInputs,
    n: int,
    env: CudaEnv,
    stream: Any,
    flush: bool,
    sleep_cycles: int,
    launch_times: bool = False,
) -> list[list[float]]:
    """``n`` interleaved repetitions in Thue-Morse order (see :func:`rep_order`): event times
    in ms per side.

    The order matters: measured on an H100 with the same aten kernel on both sides, a
    fixed A B order put the two medians up to 11% apart on 5-10 us ops (consistently
    within a case, either sign across cases); blocks of A B then B A brought all eight
    cases within 0.4%.

    Every repetition starts with a device-wide synchronize, for both sides alike: work
    either side left on any stream has finished before the next call's flush, so nothing
    the candidate queued runs beside the reference. Each side's ``window`` spans its
    repetition from that synchronize to the next, so it covers the time the GPU ran the
    call (the flush and spin kernel still cover the host's launch, as before).
    """
    k = len(sides)
    events = env.event_pairs(n * k)
    # Event pairs go by position in the sequence, not by side, so each side uses every
    # event slot equally: the diagnostic's bias followed the slot as much as the order.
    slots: list[list[int]] = [[] for _ in range(k)]
    was_enabled = _gc_isenabled()
    _gc_disable()
    try:
        for i in range(n):
            for pos, j in enumerate(rep_order(i, k)):
                side = sides[j]
                slot = 2 * (i * k + pos)
                slots[j].append(slot)
                args, kwargs = inputs.for_rep()
                with side.window():
                    _cuda_sync(env.device)
                    env.prepare(flush, sleep_cycles)
                    start, end = events[slot], events[slot + 1]
                    _ev_record(start, stream)
                    t0 = _perf_ns()
                    out = side.fn(*args, **kwargs)
                    t1 = _perf_ns()
                    _ev_record(end, stream)
                    del out, args, kwargs
                    _cuda_sync(env.device)
                if launch_times:
                    side.launch_ns.append(t1 - t0)
        _cuda_sync(env.device)
    finally:
        if was_enabled:
            _gc_enable()
    return [[_ev_elapsed(events[s], events[s + 1]) for s in slots[j]] for j in range(k)]


def device_batch_cpu(sides: list[Side], inputs: TimingInputs, n: int) -> list[list[float]]:
    """``n`` interleaved repetitions in alternating order, wall clock around each call."""
    out_times: list[list[float]] = [[] for _ in sides]
    was_enabled = _gc_isenabled()
    _gc_disable()
    try:
        for i in range(n):
            for j in rep_order(i, len(sides)):
                side = sides[j]
                args, kwargs = inputs.for_rep()
                with side.window():
                    t0 = _perf_ns()
                    out = side.fn(*args, **kwargs)
                    t1 = _perf_ns()
                    del out
                del args, kwargs
                out_times[j].append((t1 - t0) / _NS_PER_MS)
    finally:
        if was_enabled:
            _gc_enable()
    return out_times


class Timer:
    """The device-time protocol for one device kind (CUDA events or CPU wall clock)."""

    def __init__(self, device: torch.device, options: TimingOptions) -> None:
        self.device = device
        self.options = options
        self.cuda = device.type == "cuda"
        self.env = env_for(device) if self.cuda else None
        self.stream = _current_stream(device) if self.cuda else None
        self.sleep_us = 50.0 if (self.cuda and options.sleep) else 0.0

    def sync(self) -> None:
        if self.cuda:
            _cuda_sync(self.device)

    def batch(self, sides: list[Side], inputs: TimingInputs, n: int, launch_times: bool = False):
        if self.cuda:
            assert self.env is not None
            return device_batch_cuda(
                sides,
                inputs,
                n,
                self.env,
                self.stream,
                self.options.flush_l2,
                sleep_cycles(self.env, self.sleep_us),
                launch_times,
            )
        return device_batch_cpu(sides, inputs, n)

    def set_sleep_from_launches(self, sides: list[Side]) -> None:
        """Sleep long enough that the host has queued the call before the GPU gets there."""
        if not (self.cuda and self.options.sleep):
            return
        launch_us = max(
            (sorted(s.launch_ns)[len(s.launch_ns) // 2] / 1000.0 for s in sides if s.launch_ns),
            default=20.0,
        )
        self.sleep_us = min(max(1.5 * launch_us + 10.0, 20.0), 2000.0)


def first_call(
    fn: Callable[..., Any], inputs: TimingInputs, timer: Timer
) -> tuple[float, int | None]:
    """Wall time of one synchronised call (compile / autotune included) and its peak memory."""
    args, kwargs = inputs.fresh()
    timer.sync()
    peak = None
    if timer.cuda:
        torch.cuda.reset_peak_memory_stats(timer.device)
        before = torch.cuda.memory_allocated(timer.device)
    t0 = _perf_ns()
    out = fn(*args, **kwargs)
    timer.sync()
    t1 = _perf_ns()
    if timer.cuda:
        peak = int(torch.cuda.max_memory_allocated(timer.device) - before)
    del out, args, kwargs
    return (t1 - t0) / _NS_PER_MS, peak


def host_rounds(
    sides: list[Side], inputs: TimingInputs, timer: Timer, per_call_ms: float
) -> tuple[list[list[float]], int, int]:
    """Host-inclusive per-call times: rounds of back-to-back calls, then one synchronize.

    Rounds alternate A B, B A, ... Every call gets its own input copy (of a draw chosen
    per call, :class:`~opbench.instrument.timing_inputs.TimingInputs`), built before the round
    starts and bounded by ``pool_bytes``: writers never see another call's writes, and no
    call sees the objects another call saw (a kernel keyed on them would skip its work).
    """
    opt = timer.options
    least = 10 if per_call_ms < 0.2 else 2  # enough calls to amortise the final synchronize
    calls = opt.host_calls or int(min(max(opt.host_round_ms / max(per_call_ms, 1e-4), least), 1000))
    if inputs.nbytes > 0:
        calls = max(1, min(calls, opt.pool_bytes // max(inputs.nbytes, 1)))
    round_ms = calls * per_call_ms
    rounds = int(max(3, min(opt.host_rounds, opt.host_budget_ms / max(2 * round_ms, 1e-6))))
    per_side: list[list[float]] = [[] for _ in sides]
    was_enabled = _gc_isenabled()
    try:
        for r in range(rounds):
            for j in rep_order(r, len(sides)):
                side = sides[j]
                pool = inputs.pool(calls)
                fn = side.fn
                with side.window():
                    timer.sync()
                    _gc_disable()
                    t0 = _perf_ns()
                    for args, kwargs in pool:
                        fn(*args, **kwargs)
                    timer.sync()
                    t1 = _perf_ns()
                    if was_enabled:
                        _gc_enable()
                del pool
                per_side[j].append((t1 - t0) / _NS_PER_MS / calls)
    finally:
        if was_enabled:
            _gc_enable()
    return per_side, calls, rounds


def side_stream_check(sides: list[Side], inputs: TimingInputs, timer: Timer) -> dict[str, float]:
    """``wall - event`` per side on an idle GPU (us): equal for honest work on one stream.

    With the GPU idle, the start event runs as soon as it is queued and a device-wide
    synchronize returns a fixed latency after the last work ends, so ``wall - event`` is
    the same constant for any op whose work ends by its stop event. Work still running
    on another stream after the stop event adds to it.
    """
    n = timer.options.side_stream_reps
    k = len(sides)
    assert timer.env is not None
    events = timer.env.event_pairs(n * k)
    walls: list[list[float]] = [[] for _ in sides]
    evs: list[list[float]] = [[] for _ in sides]
    for i in range(n):
        for j in rep_order(i, k):
            side = sides[j]
            args, kwargs = inputs.for_rep()
            start, end = events[2 * (i * k + j)], events[2 * (i * k + j) + 1]
            with side.window():
                timer.sync()
                t0 = _perf_ns()
                _ev_record(start, timer.stream)
                out = side.fn(*args, **kwargs)
                _ev_record(end, timer.stream)
                timer.sync()
                t1 = _perf_ns()
                del out
            del args, kwargs
            walls[j].append((t1 - t0) / 1000.0)
            evs[j].append(_ev_elapsed(start, end) * 1000.0)
    excess = [interpolated_median([w - e for w, e in zip(walls[j], evs[j])]) for j in range(k)]
    return {
        "ref_excess_us": excess[0],
        "cand_excess_us": excess[1],
        "delta_us": excess[1] - excess[0],
        "ref_event_us": interpolated_median(evs[0]),
        "cand_event_us": interpolated_median(evs[1]),
    }


def synced_times(sides: list[Side], inputs: TimingInputs, timer: Timer, n: int) -> list[float]:
    """Medians (ms) with a device-wide synchronize before the stop event, both sides alike."""
    k = len(sides)
    assert timer.env is not None
    events = timer.env.event_pairs(n * k)
    times: list[list[float]] = [[] for _ in sides]
    for i in range(n):
        for j in rep_order(i, len(sides)):
            side = sides[j]
            args, kwargs = inputs.for_rep()
            with side.window():
                timer.sync()
                timer.env.prepare(timer.options.flush_l2, 0)
                timer.sync()
                start, end = events[2 * (i * k + j)], events[2 * (i * k + j) + 1]
                _ev_record(start, timer.stream)
                out = side.fn(*args, **kwargs)
                timer.sync()
                _ev_record(end, timer.stream)
                timer.sync()
                del out
            del args, kwargs
            times[j].append(_ev_elapsed(start, end))
    return [interpolated_median(t) for t in times]


def graph_times(
    sides: list[Side], inputs: TimingInputs, timer: Timer, per_call_ms: float
) -> tuple[list[float] | None, str | None]:
    """CUDA-graph replay time per side (ms), or ``None`` and why it could not be captured.

    Each side's call is captured once (after a host-sync check: an op that synchronizes
    cannot be captured, and trying would poison the stream); rounds of back-to-back
    replays alternate A, B, and the per-replay mean of each round gives a median.
    """
    reps = int(min(max(2.0 / max(per_call_ms, 1e-4), 3), timer.options.graph_replays))
    graphs = []
    for side in sides:
        args, kwargs = inputs.fresh()
        prev = torch.cuda.get_sync_debug_mode()
        try:
            torch.cuda.set_sync_debug_mode("error")
            side.fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - any failure means "not capturable"
            return None, f"{side.name}: synchronizes with the host ({type(e).__name__})"
        finally:
            torch.cuda.set_sync_debug_mode(prev)
        try:
            s = torch.cuda.Stream(timer.device)
            s.wait_stream(timer.stream)
            with torch.cuda.stream(s):
                for _ in range(2):
                    side.fn(*args, **kwargs)
            timer.stream.wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                out = side.fn(*args, **kwargs)
            for _ in range(3):
                g.replay()
            timer.sync()
            graphs.append((g, args, kwargs, out))
        except Exception as e:  # noqa: BLE001
            timer.sync()
            return (
                None,
                f"{side.name}: capture failed: {type(e).__name__}: {str(e).splitlines()[0][:160]}",
            )
    per: list[list[float]] = [[] for _ in sides]
    for _ in range(5):
        for j, (g, *_rest) in enumerate(graphs):
            a, b = _Event(enable_timing=True), _Event(enable_timing=True)
            with sides[j].window():
                timer.sync()
                _ev_record(a, timer.stream)
                for _ in range(reps):
                    g.replay()
                _ev_record(b, timer.stream)
                timer.sync()
            per[j].append(_ev_elapsed(a, b) / reps)
    del graphs
    return [interpolated_median(p) for p in per], None


def last_calls(cand: Side, inputs: TimingInputs, timer: Timer) -> None:
    """The candidate's last two timed calls: draw 0, then draw 1 in the same tensors
    (for writers, a fresh copy, which the caching allocator usually puts at the same
    address). Both outputs are kept and judged (:mod:`opbench.instrument.timed`): a
    kernel that hands back an answer it stored for these objects or addresses returns
    the same bytes for both calls, so one of them is wrong whichever draw it stored. (On
    a GPU the side-stream check calls the candidate on these tensors at a random draw
    just before, so the stored answer may be either draw's.)"""
    if len(inputs.draws) < 2:
        return
    for k in (0, 1):
        args, kwargs = inputs.holding(k)
        out = cand.fn(*args, **kwargs)
        del out, args, kwargs
    timer.sync()
