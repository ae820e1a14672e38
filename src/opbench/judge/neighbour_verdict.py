"""Verdicts on who else ran in the worker: threads and processes the unit left running,
and anything but the reference using the CPU while the reference was timed.

Runs in the HARNESS, on the raw readings of :mod:`opbench.instrument.neighbours`
(the worker reads ``/proc`` and CPU clocks and decides nothing).

Three rules, each a ``tampering`` verdict:

1. **Left running**: a thread or process alive after the unit's import or after one of
   its calls that was not alive before the import (a census by tid and pid, which sees
   ``_thread``, ``ctypes`` and C threads and double-forked daemons). ``--allow threads``
   exempts this rule only.
2. **Ran beside the reference**: inside the reference's windows (its timed calls and
   rounds, each bracketed outside the timed interval), the threads other than the timing
   thread took more CPU than the intra-op pool is allowed, or any other thread or child
   process took more than :data:`OTHERS_CPU_FLOOR_NS` and :data:`OTHERS_CPU_SHARE` of the
   windows' wall time. A Python thread that holds the GIL while the reference waits shows
   here even when the process as a whole uses no more than one core.
3. **More CPU than wall**: the process's CPU time over the windows exceeded the pinned
   intra-op threads' share of the wall time by more than :data:`PROCESS_CPU_SLACK` and
   :data:`PROCESS_CPU_FLOOR_NS`: something else ran in parallel.
"""

from __future__ import annotations

from typing import Any

from opbench.judge.evaluate import Verdict

__all__ = ["neighbour_lines", "neighbour_verdict"]

#: Rule 2: CPU that tasks other than the timing thread and the intra-op pool may take
#: inside the reference's windows before the reference counts as disturbed: the larger
#: of 500 us and 2% of the windows' wall time. Helper threads that existed before the
#: unit loaded (CUDA's, Python's) wake at times: on the H100 (2026-11-27,
#: ``benchmarks/results/worker-overhead-h100.md``) one took 92-130 us in 12-21 ms of
#: reference windows in 3 of 150 honest tests, over the 50 us / 0.5% this rule had.
#: A neighbour that spins or launches work takes far more: the smallest of the GPU
#: corpus took 71.8 ms in 78.6 ms (``neighbours-h100.md``), and CPU under 2% of the
#: windows, on another core, cannot slow the reference past the timing's own noise.
OTHERS_CPU_FLOOR_NS = 500_000
OTHERS_CPU_SHARE = 0.02
#: Rule 3: process CPU over ``threads * wall``, as a share of wall, plus 2 ms in all. It
#: covers what rule 2 cannot clock (a thread started and gone between two censuses); on
#: the 2-core CPU machine an aten-vs-aten run once read 22.63 ms of process CPU in 20.51 ms
#: of wall with one pinned thread and no other task's CPU in the windows (5% + 1 ms
#: flagged it), while a neighbour spinning on another core takes ~100% of the wall.
PROCESS_CPU_SLACK = 0.25
PROCESS_CPU_FLOOR_NS = 2_000_000


def _describe(n: dict[str, Any]) -> str:
    kind = n.get("kind")
    if kind == "python":
        return f"a Python thread {n.get('where', '')}"
    if kind == "process":
        return f"process {n.get('pid')} '{n.get('name')}' ({n.get('cmdline', '')[:80]})"
    return f"thread {n.get('tid')} '{n.get('name')}' (state {n.get('state')})"


def neighbour_lines(
    readings: dict[str, Any] | None, *, allow_threads: bool, newcomers: list[Any] | None = None
) -> list[str]:
    """The problems in one test's readings (or an import's ``newcomers``), as lines."""
    lines: list[str] = []
    readings = readings or {}
    found = list(newcomers if newcomers is not None else readings.get("newcomers") or [])
    if found and not allow_threads:
        shown = "; ".join(_describe(n) for n in found[:4])
        more = f" and {len(found) - 4} more" if len(found) > 4 else ""
        lines.append(
            f"left {len(found)} thread(s) or process(es) running that the worker did not "
            f"start: {shown}{more} (--allow threads exempts this)"
        )
    win = readings.get("reference_windows") or {}
    wall = int(win.get("wall_ns") or 0)
    if wall <= 0:
        return lines
    threads = max(1, int(readings.get("intraop_threads") or 1))
    pool = int(win.get("pool_cpu_ns") or 0)
    others = int(win.get("others_cpu_ns") or 0)
    allowed_others = max(OTHERS_CPU_FLOOR_NS, OTHERS_CPU_SHARE * wall)
    over_pool = max(0, pool - (threads - 1) * wall)
    if others + over_pool > allowed_others:
        tops = ", ".join(f"{k} {v / 1000:.0f} us" for k, v in (win.get("by_task") or {}).items())
        lines.append(
            f"while the reference was timed, other threads or processes ran "
            f"{(others + over_pool) / 1000:.0f} us of CPU in {wall / 1000:.0f} us "
            f"({win.get('windows')} windows; allowed {allowed_others / 1000:.0f} us): {tops}"
        )
    proc = int(win.get("process_cpu_ns") or 0)
    if proc > threads * wall * (1 + PROCESS_CPU_SLACK) + PROCESS_CPU_FLOOR_NS:
        lines.append(
            f"while the reference was timed, the process used {proc / 1e6:.2f} ms of CPU in "
            f"{wall / 1e6:.2f} ms of wall time with {threads} intra-op thread(s) pinned: "
            "something else ran beside it"
        )
    return lines


def neighbour_verdict(
    readings: dict[str, Any] | None, *, allow_threads: bool, when: str
) -> Verdict | None:
    """``tampering`` when :func:`neighbour_lines` finds anything, else None."""
    lines = neighbour_lines(readings, allow_threads=allow_threads)
    if not lines:
        return None
    return Verdict(
        "failed",
        "tampering",
        f"the kernel's code ran beside the judge: {'; '.join(lines)}",
        details={"tampering": lines, "when": when, "neighbours": readings},
    )
