"""Timers and CUDA entry points bound once, at import, before any candidate code runs.

Owns the *captured timers* rule of the timing protocol (:mod:`opbench.instrument.timing`):
``time.perf_counter_ns``, ``torch.cuda.Event`` and its methods, ``current_stream``,
``synchronize``, ``torch.cuda._sleep`` and the garbage collector's switches are read here
once. The worker imports the timing modules (and so this one) before it imports a
candidate, so a candidate that later patches ``time``, ``gc`` or ``torch.cuda`` does not
change the harness's clock. The timing modules bind these names at their own import.
"""

from __future__ import annotations

import gc
import time

import torch

__all__ = [
    "NS_PER_MS",
    "Event",
    "cuda_sleep",
    "cuda_sync",
    "current_stream",
    "event_elapsed",
    "event_record",
    "gc_disable",
    "gc_enable",
    "gc_isenabled",
    "perf_ns",
]

perf_ns = time.perf_counter_ns
Event = torch.cuda.Event
event_record = torch.cuda.Event.record
event_elapsed = torch.cuda.Event.elapsed_time
current_stream = torch.cuda.current_stream
cuda_sync = torch.cuda.synchronize
cuda_sleep = getattr(torch.cuda, "_sleep", None)
gc_disable, gc_enable, gc_isenabled = gc.disable, gc.enable, gc.isenabled

NS_PER_MS = 1e6
