"""``check-model --cuda-graphs``: a model's whole training step as one CUDA graph.

Owns capturing a step (forward, loss, backward, SGD step) into a ``torch.cuda.CUDAGraph``
and timing its replays, eager and with a backend enabled. Replaying a graph takes the
host out of the step: what is left is the device time of the kernels, so a backend whose
kernels are fast but whose Python launch path is slow shows its kernels' worth here and
its host cost in the plain ``--time-steps`` column.

A capture can fail where a kernel syncs the host (``.item()``, ``.cpu()``, a
data-dependent shape) or does something else a capture forbids. That failure is the
result for that side (:class:`GraphTiming` ``error``, with the ATen overload that raised
where one did), never an exception out of here: the rest of the check stands.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from opbench.models.precision import forward_precision
from opbench.models.zoo import ModelSpec

__all__ = [
    "GraphTiming",
    "call_times_ms",
    "graph_step_ms",
    "median_ms",
    "model_graph_times",
    "sync",
    "training_step",
]

#: Untimed steps on a side stream before capture: lazy initialisation (cuBLAS handles
#: and workspaces, autograd's per-device streams, a Triton kernel's first compile and
#: autotuning) must not happen inside the capture. PyTorch's whole-network example uses 3.
CAPTURE_WARMUP = 3

#: Longest error message kept (CUDA errors carry a paragraph of advice after line one).
MAX_ERROR_CHARS = 300


@dataclass
class GraphTiming:
    """One side's graph time: ``ms`` (median replay, device synchronized) or ``error``."""

    ms: float | None = None
    error: str | None = None


class _FailingOp(TorchDispatchMode):
    """Remembers the first ATen overload that raised: a failed capture's error text
    names the CUDA call ("operation not permitted when stream is capturing"), not the
    kernel that made it. The mode is popped while ``func`` runs, so a backend kernel's
    own torch calls are charged to the overload it serves."""

    def __init__(self) -> None:
        super().__init__()
        self.failed: str | None = None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        try:
            return func(*args, **(kwargs or {}))
        except Exception:
            if self.failed is None:
                self.failed = f"{func._schema.name.partition('::')[2]}.{func._overloadname}"
            raise


def training_step(
    spec: ModelSpec, model: torch.nn.Module, batch: dict[str, Any], autocast: str | None = None
) -> Callable[[], None]:
    """The step :func:`opbench.models.step_timing.alternating_step_ms` times, as a closure over
    static inputs (``batch``) for capture. Gradients are set to None first, as PyTorch's
    whole-network recipe does before capture: the captured backward then allocates them
    from the graph's pool and each replay overwrites them, the same work as an eager
    step after ``zero_grad(set_to_none=True)`` (no zeroing kernel, no accumulation).
    ``autocast`` (bf16, f16): the forward and loss under ``torch.autocast``
    (:mod:`opbench.models.precision`)."""
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    device = str(next(model.parameters()).device)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with forward_precision(device, autocast):
            loss = spec.loss(spec.call(model, batch), batch)
        loss.backward()
        opt.step()

    return step


def _capture(step: Callable[[], None], device: str, warmup: int, ops: _FailingOp) -> Any:
    """Warm ``step`` up on a side stream, then capture one call of it into a graph."""
    with torch.cuda.device(torch.device(device)):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        # the outer stream context puts the caller's stream back even when the capture
        # fails and ``torch.cuda.graph``'s exit raises before restoring it
        with torch.cuda.stream(side), ops:
            for _ in range(warmup):
                step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.stream(torch.cuda.current_stream()), ops:
            with torch.cuda.graph(graph):
                step()
        return graph


def sync(device: str) -> None:
    """Wait for the device (a no-op on the CPU)."""
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def call_times_ms(call: Callable[[], Any], device: str, steps: int, warmup: int = 2) -> list[float]:
    """Wall times (ms) of ``steps`` calls of ``call``, the device synchronized before and
    after each, after ``warmup`` untimed calls that take first-call costs (compiles,
    allocator growth) out: a training step's timings, eager or replayed."""
    times = []
    for i in range(warmup + steps):
        sync(device)
        t0 = time.perf_counter()
        call()
        sync(device)
        if i >= warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    return times


def median_ms(call: Callable[[], Any], device: str, steps: int, warmup: int = 2) -> float:
    """The median of :func:`call_times_ms`."""
    times = sorted(call_times_ms(call, device, steps, warmup))
    return times[len(times) // 2]


def _root(e: BaseException) -> BaseException:
    """The first error of a chain: a failed capture raises again from the graph's exit
    ("capture invalidated"), with the kernel's own error as its context."""
    seen = {id(e)}
    while (nxt := e.__cause__ or e.__context__) is not None and id(nxt) not in seen:
        seen.add(id(nxt))
        e = nxt
    return e


def _describe(e: BaseException, op: str | None, stage: str) -> str:
    root = _root(e)
    first = (str(root).strip().splitlines() or [""])[0]
    where = f" in {op}" if op else ""
    return f"{stage} failed{where}: {type(root).__name__}: {first}"[:MAX_ERROR_CHARS]


def graph_step_ms(
    step: Callable[[], None], device: str, steps: int, warmup: int = 2
) -> GraphTiming:
    """Capture ``step`` and return the median wall time (ms) of ``steps`` replays, the
    device synchronized around each, after ``warmup`` untimed replays: the same count
    and synchronization as :func:`opbench.models.step_timing.alternating_step_ms`. Never
    raises: a failed warm-up, capture or replay is the returned ``error``."""
    ops = _FailingOp()
    stage = "capture"
    try:
        graph = _capture(step, device, CAPTURE_WARMUP, ops)
        stage = "replay"
        return GraphTiming(ms=median_ms(graph.replay, device, steps, warmup))
    except Exception as e:  # the check goes on without this side's graph time
        error = _describe(e, ops.failed, stage)
    try:  # leave the device usable for the next side; a failure here is already told
        sync(device)
    except Exception:  # noqa: BLE001
        pass
    return GraphTiming(error=error)


def model_graph_times(
    spec: ModelSpec,
    base: torch.nn.Module,
    batch: dict[str, Any],
    device: str,
    steps: int,
    enable_backend: Callable[[], AbstractContextManager[Any]],
    autocast: str | None = None,
) -> tuple[GraphTiming, GraphTiming]:
    """(eager, backend) graph times of ``base``'s training step (its forward under
    ``autocast`` if given), each on its own copy; the backend's capture runs inside
    ``enable_backend()`` so its kernels are what the graph records. Never raises: the
    backend failing to enable is that side's error."""
    out = []
    for enable in (nullcontext, enable_backend):
        try:
            model = copy.deepcopy(base)  # before enabling: see check.py's step timing
            with enable():
                timing = graph_step_ms(training_step(spec, model, batch, autocast), device, steps)
        except Exception as e:
            timing = GraphTiming(error=_describe(e, None, "setup"))
        out.append(timing)
    return out[0], out[1]
