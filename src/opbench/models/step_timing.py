"""``check-model --time-steps``: a model's training step timed eager and on a backend,
the two sides taking turns.

Owns the timing protocol of the step column (the CUDA graph column is
:mod:`opbench.models.graph_timing`'s): blocks of steps, eager's then the backend's, each
after its own warm-up, the backend registered for its blocks only, and the backend's
call counts read over its last block, where launch replay serves what a training loop
runs. Separate from :mod:`opbench.models.check`, which compares the two sides' results.
"""

from __future__ import annotations

import copy
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from opbench.backends import registry
from opbench.models.graph_timing import call_times_ms, training_step
from opbench.models.zoo import ModelSpec

__all__ = ["STEP_TURNS", "TURN_WARMUP", "StepTimes", "alternating_step_ms"]


#: Eager and the backend take turns this many times over the timed steps, each turn a
#: block of steps after its own warm-up: a host whose speed drifts over a run moves both
#: sides alike, not the side timed second. (One H200 lend read GPT-2's eager step at
#: 4.6 to 8.8 ms from one process to the next, and one eager-then-backend block of 10
#: steps each read the backend 0.87x in one process and 1.11x in the next.)
STEP_TURNS = 3
#: Untimed steps before each turn: the backend is registered again for each, so launch
#: replay records its signatures again; it serves a signature from its third or fourth
#: call (:data:`opbench.models.check.REPLAY_FROM_CALL`), and the first timed step must find that done.
TURN_WARMUP = 3


@dataclass
class StepTimes:
    """:func:`alternating_step_ms`'s answer: each side's median step, and the backend's
    call counts over its last block of timed steps (``registry.call_counts()``)."""

    eager_ms: float
    backend_ms: float
    timed_counts: dict[str, dict[str, int]]
    timed_steps: int


def alternating_step_ms(spec: ModelSpec, base: torch.nn.Module, batch: dict[str, Any],
                        device: str, steps: int, enable_backend: Callable[[], Any],
                        turns: int = STEP_TURNS, autocast: str | None = None) -> StepTimes:  # fmt: skip
    """Median wall time (ms) of one training step eager and on the backend (forward,
    loss, backward, SGD step; the device synchronized after each), each on its own copy
    of ``base``: ``turns`` turns of eager's block then the backend's (registered by
    ``enable_backend()``, a context manager, for its block only), ``steps`` timed steps
    a side in all, each block after :data:`TURN_WARMUP` untimed steps. Host time counts:
    in an eager model it is part of what a backend costs. The backend's call counts are
    read over its last block's timed steps alone: what a training loop runs once replay
    serves its signatures (the checked step's counts are its first calls). ``autocast``:
    the forward and loss under ``torch.autocast`` (:mod:`opbench.models.precision`)."""
    eager_model = copy.deepcopy(base)
    # copied before registering: deepcopy under the aten backend's detach and alias
    # kernels fails ("Creating a new Tensor subclass Parameter")
    backend_model = copy.deepcopy(base)
    turns = max(1, min(turns, steps))
    eager: list[float] = []
    backend: list[float] = []
    counts: dict[str, dict[str, int]] = {}
    block = 0
    for turn in range(turns):
        block = steps // turns + (1 if turn < steps % turns else 0)
        step = training_step(spec, eager_model, batch, autocast)
        call_times_ms(step, device, 0, TURN_WARMUP)
        eager += call_times_ms(step, device, block, 0)
        with enable_backend():
            step = training_step(spec, backend_model, batch, autocast)
            call_times_ms(step, device, 0, TURN_WARMUP)
            registry.reset_counts()
            backend += call_times_ms(step, device, block, 0)
            counts = registry.call_counts()
    return StepTimes(statistics.median(eager), statistics.median(backend), counts, block)
