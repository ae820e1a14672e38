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
  ``current_stream`` and ``synchronize`` are bound at import; a candidate imported
  later that patches ``time`` or ``torch.cuda`` does not change the harness's clock.

The CPU path runs the same protocol with ``perf_counter_ns`` around each call (no
flush), labelled ``"timer": "cpu-wall"``, so the pipeline runs in CI.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import glob
import logging
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch

from opbench.instrument.timing_inputs import (
    TimingInputs,
    clone_inputs,
    schema_writes,
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

log = logging.getLogger(__name__)

# --------------------------------------------------------------------------- captured timers
# Bound once at import, before any candidate code runs in this process.
_perf_ns = time.perf_counter_ns
_Event = torch.cuda.Event
_ev_record = torch.cuda.Event.record
_ev_elapsed = torch.cuda.Event.elapsed_time
_current_stream = torch.cuda.current_stream
_cuda_sync = torch.cuda.synchronize
_cuda_sleep = getattr(torch.cuda, "_sleep", None)
_gc_disable, _gc_enable, _gc_isenabled = gc.disable, gc.enable, gc.isenabled

_NS_PER_MS = 1e6


# --------------------------------------------------------------------------- options / result


@dataclass
class TimingOptions:
    """How hard to time one test. Defaults fit a whole traces suite (~0.3-0.5 s a test).

    ``budget_ms`` bounds the interleaved device-time phase (both sides together);
    ``host_budget_ms`` the host-inclusive rounds. ``host_calls`` is the number of
    back-to-back calls per round (None: enough for ~``host_round_ms``).
    ``rel_err_target`` is the relative standard error of each median at which the
    device phase stops early. ``flush_l2`` and ``sleep`` only apply to CUDA.
    """

    warmup_ms: float = 10.0
    min_reps: int = 20
    max_reps: int = 2000
    rel_err_target: float = 0.004
    budget_ms: float = 200.0
    host_calls: int | None = None
    host_rounds: int = 7
    host_round_ms: float = 2.0
    host_budget_ms: float = 60.0
    cuda_graph: bool = False
    graph_replays: int = 50
    flush_l2: bool = True
    sleep: bool = True
    side_stream_check: bool = True
    side_stream_reps: int = 12
    pool_bytes: int = 512 * 1024 * 1024  # at most this much for host-round input copies
    #: inputs up to this size also get a second draw to alternate with (timing_inputs.py)
    alternate_max_bytes: int = 1 << 30


@dataclass
class Summary:
    """Statistics of one set of samples (ms). ``rel_se``: relative std-error of the median."""

    median: float
    q1: float
    q3: float
    iqr: float
    rel_iqr: float
    rel_se: float
    min: float
    n: int


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


# --------------------------------------------------------------------------- statistics


def interpolated_median(xs: Sequence[float]) -> float:
    """The median, interpolated within the tie group at the middle.

    Event timers tick (~0.5 us documented): for a 4 us kernel, two identical sides can
    give medians one tick (12%) apart. For data on a lattice of step ``w`` the grouped
    median ``c - w/2 + w (n/2 - below) / f`` (``f`` values tied at ``c``, ``below``
    under it) is continuous; without ties it is the ordinary median. A neighbour
    farther than ``c/2`` is an outlier, not a tick: then the ordinary median.
    """
    s = sorted(xs)
    n = len(s)
    if n == 0:
        return math.nan
    plain = s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])
    if n < 3:
        return plain
    c = s[n // 2]
    eps = 1e-9 * abs(c) + 1e-15
    below = sum(1 for v in s if v < c - eps)
    f = sum(1 for v in s if abs(v - c) <= eps)
    if f < 3:
        return plain
    lower = [v for v in s if v < c - eps]
    upper = [v for v in s if v > c + eps]
    gaps = []
    if lower:
        gaps.append(c - lower[-1])
    if upper:
        gaps.append(upper[0] - c)
    if not gaps:
        return c
    w = min(gaps)
    if w > 0.5 * abs(c):
        return plain  # neighbours that far away are outliers, not timer ticks
    return c - w / 2 + w * (n / 2 - below) / f


def _quantile(s: Sequence[float], p: float) -> float:
    """Linear-interpolated quantile of sorted ``s`` (numpy's default)."""
    if not s:
        return math.nan
    pos = p * (len(s) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summarize(xs: Sequence[float]) -> Summary:
    """Median (interpolated for ties), quartiles and the median's relative std-error.

    ``rel_se`` uses the large-sample error of a median, 1.2533 sigma / sqrt(n), with
    sigma from the IQR (robust to outliers), floored by the tick size / sqrt(12).
    """
    s = sorted(float(x) for x in xs)
    n = len(s)
    if n == 0:
        nan = math.nan
        return Summary(nan, nan, nan, nan, nan, nan, nan, 0)
    med = interpolated_median(s)
    q1, q3 = _quantile(s, 0.25), _quantile(s, 0.75)
    iqr = q3 - q1
    distinct = sorted(set(s))
    tick = min((b - a for a, b in zip(distinct, distinct[1:])), default=0.0)
    sigma = max(iqr / 1.349, tick / math.sqrt(12))
    rel_se = (1.2533 * sigma / math.sqrt(n) / med) if med > 0 else math.inf
    rel_iqr = iqr / med if med > 0 else math.inf
    return Summary(med, q1, q3, iqr, rel_iqr, rel_se, s[0], n)


# --------------------------------------------------------------------------- CUDA environment


class _CudaEnv:
    """Per-device state: the flush buffer, the sleep calibration, the L2 facts."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        props = torch.cuda.get_device_properties(device)
        self.name = props.name
        l2 = int(getattr(props, "L2_cache_size", 0) or 0)
        self.l2_bytes = l2 if l2 > 0 else 64 * 1024 * 1024
        self.flush_bytes = int(min(max(4 * self.l2_bytes, 64 * 1024 * 1024), 1024**3))
        self.flush_buf = torch.empty(self.flush_bytes // 4, dtype=torch.int32, device=device)
        self.persisting_l2 = reset_persisting_l2()
        self.cycles_per_us = self._calibrate_sleep()
        self.events: list[Any] = []

    def _calibrate_sleep(self) -> float:
        if _cuda_sleep is None:
            return 0.0
        stream = _current_stream(self.device)
        cycles = 1_000_000
        times = []
        for _ in range(4):
            a, b = _Event(enable_timing=True), _Event(enable_timing=True)
            _ev_record(a, stream)
            _cuda_sleep(cycles)
            _ev_record(b, stream)
            _cuda_sync(self.device)
            times.append(_ev_elapsed(a, b) * 1000.0)
        us = sorted(times)[len(times) // 2]
        return cycles / us if us > 0 else 0.0

    def event_pairs(self, n: int) -> list[Any]:
        while len(self.events) < 2 * n:
            self.events.append(_Event(enable_timing=True))
        return self.events

    def prepare(self, flush: bool, sleep_cycles: int) -> None:
        """Before one repetition: evict L2, then keep the GPU busy while the host queues."""
        if flush:
            self.flush_buf.fill_(1)  # same work every time, never zeros
        if sleep_cycles > 0 and _cuda_sleep is not None:
            _cuda_sleep(sleep_cycles)


_ENVS: dict[str, _CudaEnv] = {}


def _env(device: torch.device) -> _CudaEnv:
    key = str(device)
    if key not in _ENVS:
        _ENVS[key] = _CudaEnv(device)
    return _ENVS[key]


_CUDA_LIMIT_PERSISTING_L2 = 0x06


def reset_persisting_l2() -> str:
    """Set the persisting-L2 limit to 0 and drop persisting lines (best effort).

    PyTorch has no API for it; the CUDA runtime is reached through ``cuda.bindings``
    or the ``libcudart`` already loaded by torch. Returns what happened, for the record.
    """
    try:
        from cuda.bindings import runtime as rt  # type: ignore[import-not-found]

        (e1,) = rt.cudaDeviceSetLimit(rt.cudaLimit.cudaLimitPersistingL2CacheSize, 0)
        (e2,) = rt.cudaCtxResetPersistingL2Cache()
        ok = rt.cudaError_t.cudaSuccess
        return "reset (cuda.bindings)" if e1 == ok and e2 == ok else f"failed ({e1}, {e2})"
    except Exception:  # noqa: BLE001 - optional dependency, any failure means "try next"
        pass
    for lib in _cudart_candidates():
        try:
            set_limit = lib.cudaDeviceSetLimit
            reset = lib.cudaCtxResetPersistingL2Cache
        except AttributeError:
            continue
        set_limit.argtypes = [ctypes.c_int, ctypes.c_size_t]
        set_limit.restype = ctypes.c_int
        reset.argtypes = []
        reset.restype = ctypes.c_int
        rc1 = set_limit(_CUDA_LIMIT_PERSISTING_L2, 0)
        rc2 = reset()
        return "reset (libcudart)" if rc1 == 0 and rc2 == 0 else f"failed (rc {rc1}, {rc2})"
    return "unavailable (no CUDA runtime entry point found)"


def _cudart_candidates() -> list[Any]:
    libs: list[Any] = []
    try:
        libs.append(ctypes.CDLL(None))
    except OSError:
        pass
    roots = [os.path.dirname(torch.__file__)] + [p for p in sys.path if p]
    seen: set[str] = set()
    for root in roots:
        for pattern in (
            "lib/libcudart.so*",
            "nvidia/*/lib/libcudart.so*",
            "nvidia/cu*/lib/libcudart.so*",
        ):
            for path in sorted(glob.glob(os.path.join(root, pattern))):
                if path in seen:
                    continue
                seen.add(path)
                try:
                    libs.append(ctypes.CDLL(path))
                except OSError:
                    continue
    return libs


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

    sides = [_Side("floor", empty)]
    inputs = TimingInputs(([], {}), mutating=False)
    if dev.type == "cuda":
        with torch.cuda.device(dev):
            env = _env(dev)
            stream = _current_stream(dev)
            _device_batch_cuda(sides, inputs, 20, env, stream, True, _sleep_cycles(env, 20.0))
            samples = _device_batch_cuda(
                sides, inputs, reps, env, stream, True, _sleep_cycles(env, 20.0)
            )[0]
    else:
        _device_batch_cpu(sides, inputs, 50)
        samples = _device_batch_cpu(sides, inputs, reps)[0]
    floor = interpolated_median(samples)
    _FLOOR[key] = floor
    return floor


# --------------------------------------------------------------------------- the timing loops


def _unwatched() -> contextlib.AbstractContextManager[None]:
    return contextlib.nullcontext()


class _Side:
    """One side of the comparison and what was learnt about it during warm-up.

    ``window``: a context manager factory entered around this side's timed work, outside
    its timed interval (the reference's: :meth:`opbench.instrument.neighbours.
    NeighbourWatch.reference`, which clocks whatever else ran meanwhile)."""

    def __init__(
        self,
        name: str,
        fn: Callable[..., Any],
        window: Callable[[], contextlib.AbstractContextManager[None]] = _unwatched,
    ) -> None:
        self.name = name
        self.fn = fn
        self.window = window
        self.samples: list[float] = []
        self.launch_ns: list[int] = []


def _sleep_cycles(env: _CudaEnv, us: float) -> int:
    return int(env.cycles_per_us * us) if env.cycles_per_us > 0 else 0


def _balanced_batch(n: int) -> int:
    """``n`` rounded up to a multiple of 8: each batch is then balanced in every call
    index modulo 2, 4 and 8 (Thue-Morse blocks of 8 repetitions)."""
    return max(8, -(-n // 8) * 8)


def _order(i: int, k: int) -> range:
    """Side indices for repetition ``i``, in Thue-Morse order: A B, B A, B A, A B, ...

    Forwards when ``i`` has an even number of one bits, else backwards. Measured on an
    H100 (``benchmarks/timing_diag.py``): one call position in every four ran ~10% slow
    for small ops, whatever ran there, so fixed A B order and plain A B / B A alternation
    both handed that slot to one side. The Thue-Morse sequence gives each side every call
    index modulo 2, 4 and 8 equally often.
    """
    return range(k) if bin(i).count("1") % 2 == 0 else range(k - 1, -1, -1)


def _device_batch_cuda(
    sides: list[_Side],
    inputs: TimingInputs,
    n: int,
    env: _CudaEnv,
    stream: Any,
    flush: bool,
    sleep_cycles: int,
    launch_times: bool = False,
) -> list[list[float]]:
    """``n`` interleaved repetitions in Thue-Morse order (see :func:`_order`): event times
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
            for pos, j in enumerate(_order(i, k)):
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


def _device_batch_cpu(sides: list[_Side], inputs: TimingInputs, n: int) -> list[list[float]]:
    """``n`` interleaved repetitions in alternating order, wall clock around each call."""
    out_times: list[list[float]] = [[] for _ in sides]
    was_enabled = _gc_isenabled()
    _gc_disable()
    try:
        for i in range(n):
            for j in _order(i, len(sides)):
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


class _Timer:
    """The device-time protocol for one device kind (CUDA events or CPU wall clock)."""

    def __init__(self, device: torch.device, options: TimingOptions) -> None:
        self.device = device
        self.options = options
        self.cuda = device.type == "cuda"
        self.env = _env(device) if self.cuda else None
        self.stream = _current_stream(device) if self.cuda else None
        self.sleep_us = 50.0 if (self.cuda and options.sleep) else 0.0

    def sync(self) -> None:
        if self.cuda:
            _cuda_sync(self.device)

    def batch(self, sides: list[_Side], inputs: TimingInputs, n: int, launch_times: bool = False):
        if self.cuda:
            assert self.env is not None
            return _device_batch_cuda(
                sides,
                inputs,
                n,
                self.env,
                self.stream,
                self.options.flush_l2,
                _sleep_cycles(self.env, self.sleep_us),
                launch_times,
            )
        return _device_batch_cpu(sides, inputs, n)

    def set_sleep_from_launches(self, sides: list[_Side]) -> None:
        """Sleep long enough that the host has queued the call before the GPU gets there."""
        if not (self.cuda and self.options.sleep):
            return
        launch_us = max(
            (sorted(s.launch_ns)[len(s.launch_ns) // 2] / 1000.0 for s in sides if s.launch_ns),
            default=20.0,
        )
        self.sleep_us = min(max(1.5 * launch_us + 10.0, 20.0), 2000.0)


def _first_call(
    fn: Callable[..., Any], inputs: TimingInputs, timer: _Timer
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


def _host_rounds(
    sides: list[_Side], inputs: TimingInputs, timer: _Timer, per_call_ms: float
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
            for j in _order(r, len(sides)):
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


def _side_stream_check(sides: list[_Side], inputs: TimingInputs, timer: _Timer) -> dict[str, float]:
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
        for j in _order(i, k):
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


def _synced_times(sides: list[_Side], inputs: TimingInputs, timer: _Timer, n: int) -> list[float]:
    """Medians (ms) with a device-wide synchronize before the stop event, both sides alike."""
    k = len(sides)
    assert timer.env is not None
    events = timer.env.event_pairs(n * k)
    times: list[list[float]] = [[] for _ in sides]
    for i in range(n):
        for j in _order(i, len(sides)):
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


def _graph_times(
    sides: list[_Side], inputs: TimingInputs, timer: _Timer, per_call_ms: float
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


def _last_calls(cand: _Side, inputs: TimingInputs, timer: _Timer) -> None:
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
        timer = _Timer(dev, opt)
        ms, note = _graph_times(
            [_Side("ref", ref), _Side("cand", cand)], inputs, timer, per_call_ms
        )
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
    watch = (reference_window or _unwatched, look or (lambda: None))
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
    watch: tuple[Any, Callable[[], Any]] = (_unwatched, lambda: None),
) -> PairTiming:
    floor = measure_launch_floor(dev)
    reference_window, look = watch
    timer = _Timer(dev, opt)
    args, kwargs = make_args()
    template = (list(args), dict(kwargs))
    make_alt, inputs_ready = draws
    inputs = TimingInputs(
        template, schema_writes(ref), make_alt, max_alternate_bytes=opt.alternate_max_bytes
    )
    if inputs_ready is not None:
        inputs_ready(inputs)
    sides = [_Side("ref", ref, reference_window), _Side("cand", cand)]

    # First calls (compile / autotune / lazy init) and peak memory, each on fresh inputs.
    ref_first, ref_peak = _first_call(ref, inputs, timer)
    cand_first, cand_peak = _first_call(cand, inputs, timer)
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
    batch = _balanced_batch(max(min_reps, 1))
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
        batch = _balanced_batch(int(min(max(left / per_pair_ms, 5), opt.max_reps - n)))
    ref_st, cand_st = (summarize(s.samples) for s in sides)

    # Host-inclusive time.
    launch_ms = [
        sorted(s.launch_ns)[len(s.launch_ns) // 2] / _NS_PER_MS for s in sides if s.launch_ns
    ]
    per_call = max(ref_st.median, cand_st.median, *launch_ms, 1e-4)
    inputs.phase = "host"
    with pause():
        host, calls, rounds = _host_rounds(sides, inputs, timer, per_call)
    inputs.phase = "other"
    look()
    ref_host, cand_host = (summarize(h) for h in host)

    side_info = synced = None
    if timer.cuda and opt.side_stream_check:
        with pause():
            side_info = _side_stream_check(sides, inputs, timer)
        # What to measure next, not a verdict: the harness applies its own tolerance
        # (opbench.judge.timing_rules); these probes start at half of it, so it always has
        # the second probe and the synced times when it could flag the candidate.
        probe_us = max(1.5, 0.05 * side_info["ref_event_us"])
        if side_info["delta_us"] > probe_us:
            # a second probe: a one-off host hiccup must not flag an honest kernel
            with pause():
                again = _side_stream_check(sides, inputs, timer)
            if again["delta_us"] < side_info["delta_us"]:
                side_info = again
        if side_info["delta_us"] > probe_us:
            with pause():
                s_ref, s_cand = _synced_times(sides, inputs, timer, max(opt.min_reps, 10))
            synced = {"ref_ms": s_ref, "cand_ms": s_cand}

    graph_ms: list[float] | None = None
    graph_note = None
    if timer.cuda and opt.cuda_graph:
        with pause():
            graph_ms, graph_note = _graph_times(sides, inputs, timer, per_call)

    paused_cpu.close()
    _last_calls(sides[1], inputs, timer)
    look()
    inputs_changed = not inputs.mutating and inputs.became_dirty()

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
