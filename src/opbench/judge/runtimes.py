"""Runtimes for the dataset table: how long PyTorch itself takes on each traced case.

Fills ``runtime_ms``, ``relative_runtime_to_kernel_launch`` and
``is_overhead_dominated_op`` of :func:`opbench.suites.traces.dataset_rows` with the
device-time protocol of :mod:`opbench.instrument.timing` (events, L2 flushed, median): PyTorch
timed against itself, interleaved, so the number is the one a run's reference side would
get. Only PyTorch's own kernels run here, never candidate code, so this runs in-process.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from typing import Any

from opbench.instrument.timing import TimingOptions, measure_launch_floor, time_pair
from opbench.spec.args import parse_args
from opbench.spec.ops import get_overload
from opbench.suites.case import Case
from opbench.suites.inputs import make_inputs, resolve_op_name
from opbench.suites.traces import case_uuid

log = logging.getLogger(__name__)

#: The published rule: within this factor of the launch floor is overhead-dominated.
OVERHEAD_FACTOR = 1.3


def fill_runtimes(
    rows: list[dict[str, Any]],
    cases: list[Case],
    device: str,
    *,
    limit_per_op: int | None = None,
    budget_ms: float = 40.0,
    on_progress: Callable[[int, int], None] | None = None,
) -> dict[str, int]:
    """Time the included cases (the first ``limit_per_op`` of each op) and fill their rows.

    A case that fails to build or run keeps null runtimes and is counted under
    ``failed``; the others are untouched. Returns counts of what happened.
    """
    by_uuid = {r["uuid"]: r for r in rows}
    todo: list[Case] = []
    per_op: Counter[str] = Counter()
    for c in cases:
        if not c.included or (limit_per_op is not None and per_op[c.op] >= limit_per_op):
            continue
        per_op[c.op] += 1
        todo.append(c)
    floor = measure_launch_floor(device)
    options = TimingOptions(budget_ms=budget_ms, host_budget_ms=5.0, side_stream_check=False)
    done = failed = 0
    for i, c in enumerate(todo):
        try:
            name = resolve_op_name(c.op)
            fn = get_overload(name)
            args, kwargs = make_inputs(c.op, parse_args(c.args), device, c.seed)
            t = time_pair(fn, fn, lambda a=args, k=kwargs: (a, k), device, options)
            ms = t.ref_device_ms
            row = by_uuid[case_uuid(c.op, c.args)]
            row["runtime_ms"] = ms
            row["relative_runtime_to_kernel_launch"] = ms / floor if floor > 0 else None
            row["is_overhead_dominated_op"] = bool(floor > 0 and ms <= OVERHEAD_FACTOR * floor)
            done += 1
        except Exception as e:  # one bad case must not lose the table
            log.warning("could not time aten.%s %s: %s: %s", c.op, c.args[:80], type(e).__name__, e)
            failed += 1
        if on_progress:
            on_progress(i + 1, len(todo))
    return {"timed": done, "failed": failed, "launch_floor_us": round(floor * 1e3, 3)}
