"""Which worker judges which case: isolation units, the static scan before any import,
and the results of cases no worker needs to run.

Runs in the HARNESS. Every case is mapped to its isolation unit
(:mod:`opbench.backends.units`); cases are handed to workers in chunks of one unit,
and a worker imports one unit's code only, so nothing one operator's module does can
reach another operator's verdict. Before a unit's code is imported anywhere, its files
are scanned (:mod:`opbench.judge.static_scan`): a tampering finding fails the unit's
tests without running them; warnings travel with each test's result.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from opbench.backends.units import WHOLE_BACKEND, DirectoryLayout, layout_of
from opbench.run.store import TestResult, case_fields
from opbench.spec.args import described_numel
from opbench.suites.case import Case

__all__ = [
    "CHUNK",
    "CHUNKS_PER_SLOT",
    "IsolationPlanner",
    "Unit",
    "balanced",
    "case_cost",
    "chunk_size",
    "chunks",
    "tampering_result",
]

#: Cases per chunk handed to a worker slot: one unit's tests stay together; a backend
#: that is one unit (aten) is cut into chunks so several slots share it.
CHUNK = 32

#: A unit: the kernel folders a worker imports (sorted); ``None``: the whole backend.
Unit = tuple[str, ...] | None


@dataclass
class IsolationPlanner:
    """The harness's view of a backend's units, scans and load problems."""

    backend: str
    kernel_version: str | None = None
    allow_rules: frozenset[str] = frozenset()
    layout: DirectoryLayout | None = None
    scans: dict[tuple[str, ...], list[Any]] = field(default_factory=dict)
    load_errors: dict[str, str] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self.layout = layout_of(self.backend, self.kernel_version)
        if self.layout is not None:
            self.load_errors.update(self.layout.errors)

    def unit_of(self, op: str) -> Unit:
        """The unit judging ``op``: its folders, ``()`` when no folder serves it, or
        ``None`` for a backend that is one unit."""
        if self.layout is None:
            return None
        return self.layout.unit_for(op)

    def scan(self, unit: Unit) -> list[Any]:
        """The static scan of a unit's files (cached; empty for one-unit backends)."""
        if not unit or self.layout is None:
            return []
        with self._lock:
            if unit in self.scans:
                return self.scans[unit]
        from opbench.judge.static_scan import scan_files

        paths = [self.layout.files[f] for f in unit if f in self.layout.files]
        findings = scan_files(paths, allow=self.allow_rules, root=self.layout.path)
        with self._lock:
            self.scans[unit] = findings
        return findings

    def note_loaded(self, info: dict[str, Any] | None) -> None:
        """Merge what a worker reported when it imported a unit."""
        if info and info.get("load_errors"):
            with self._lock:
                self.load_errors.update(info["load_errors"])

    def scan_report(self) -> dict[str, list[dict[str, Any]]]:
        """Every scanned kernel file's findings, for the summary (file -> findings)."""
        out: dict[str, list[dict[str, Any]]] = {}
        with self._lock:
            for findings in self.scans.values():
                for f in findings:
                    out.setdefault(f.file, []).append(f.to_dict())
            if self.layout is not None:
                for unit in self.scans:
                    for folder in unit:
                        file = self.layout.files.get(folder)
                        if file is not None:
                            out.setdefault(str(file.relative_to(self.layout.path)), [])
        return dict(sorted(out.items()))

    # -- results for cases that no worker runs --------------------------------------
    def result_without_worker(
        self, case: Case, unit: Unit, *, backend: str, device: str
    ) -> TestResult | None:
        """``not_implemented`` when no folder serves the op; ``tampering`` when the
        static scan found tampering in the unit's source; else None (run it)."""
        base = case_fields(case, backend=backend, device=device)
        if unit == WHOLE_BACKEND and self.layout is not None:
            return TestResult(
                status="not_implemented",
                category="not_implemented",
                message=f"the backend has no kernel for {case.op}",
                **base,
            )
        return tampering_result(self.scan(unit), base, source="kernel")


def tampering_result(
    findings: Sequence[Any],
    base: dict[str, Any],
    *,
    source: str,
    details: dict[str, Any] | None = None,
) -> TestResult | None:
    """The ``tampering`` failure of a test whose source the static scan blocked (before
    any of it runs), or None when no finding is tampering. ``findings``: the scan's
    findings for the ``source`` (``"kernel"``, ``"candidate"``), all of them kept in
    ``details["static_scan"]`` beside ``details``; ``base``: the result's other fields.
    Shared by operator runs (a unit's kernel files) and program runs (a candidate
    file)."""
    from opbench.judge.static_scan import tampering

    blocking = tampering(findings)
    if not blocking:
        return None
    lines = [f"{f.file}:{f.line} {f.rule}: {f.message}" for f in blocking]
    return TestResult(
        status="failed",
        category="tampering",
        message=f"static scan of the {source} source: " + "; ".join(lines[:5]),
        details={**(details or {}), "static_scan": [f.to_dict() for f in findings]},
        **base,
    )


#: Chunks a slot gets at least, where the suite is small for its slots: the last chunks
#: then even the slots out. The traces suite at one test per op is 166 tests and one unit
#: for aten: in chunks of 32 (five, and one of 6) 4 slots ran 64, 38, 32 and 32 of them,
#: and the run lasted as long as the slot with 64 (its tests phase on 4 x H100 was 2.25x
#: the one on 1, 2026-11-27).
CHUNKS_PER_SLOT = 4
#: Input elements that cost about as much as a test's fixed cost (a fresh trial plan, the
#: worker's round trip): on a 4 x H100 traces run a test took 1.35 s on average, and its
#: largest inputs (10^8 elements) several seconds. A ranking, not a timing model.
ELEMENTS_PER_TEST_COST = 2**24


def case_cost(case: Case) -> float:
    """A rough cost of judging ``case``: one for the test, plus its input elements in
    units of :data:`ELEMENTS_PER_TEST_COST`. Only the order of costs matters."""
    return 1.0 + described_numel(case.args or "") / ELEMENTS_PER_TEST_COST


def chunk_size(n_cases: int, slots: int) -> int:
    """Cases per chunk: :data:`CHUNK`, or fewer so that ``slots`` get
    :data:`CHUNKS_PER_SLOT` chunks each."""
    return max(1, min(CHUNK, math.ceil(n_cases / (max(1, slots) * CHUNKS_PER_SLOT))))


def chunks(
    cases: Sequence[Case], planner: IsolationPlanner, slots: int = 1
) -> Iterator[tuple[Unit, list[Case]]]:
    """Cases grouped by unit, cut into chunks of at most :func:`chunk_size`, which the
    slots take in this order.

    A suite big for its slots goes out as before: each unit's tests in suite order, in
    runs of :data:`CHUNK`. A small one is also balanced (:func:`balanced`): its ops
    costliest first, each to the unit's chunk that costs least so far. Either way an
    op's tests stay together, cut only past :data:`CHUNK`: the crash budget counts an
    op's crashes in turn, and an op's tests on two workers at once made how many were
    left not run a race (Ray and local disagreed on a kernel folder's crashing op, CPU
    CI, 2026-11-27). A unit's chunks go out together (a slot keeps its worker while its
    next chunk has the same unit)."""
    size = chunk_size(len(cases), slots)
    units: dict[Unit, list[Case]] = {}
    for c in cases:
        units.setdefault(planner.unit_of(c.op), []).append(c)
    if size == CHUNK:
        for unit, group in units.items():
            for i in range(0, len(group), CHUNK):
                yield unit, group[i : i + CHUNK]
        return
    cut = {unit: balanced(group, size) for unit, group in units.items()}
    first = {unit: sum(map(case_cost, chunks_[0])) for unit, chunks_ in cut.items()}
    for unit in sorted(cut, key=lambda u: first[u], reverse=True):  # the costliest first
        for chunk in cut[unit]:
            yield unit, chunk


def balanced(group: Sequence[Case], size: int) -> list[list[Case]]:
    """One unit's tests in chunks of about ``size`` that cost about the same
    (:func:`case_cost`), the costliest chunk first: each op's tests (in runs of
    :data:`CHUNK`, as a big suite's; an op with more than ``size`` is a chunk of its own)
    go, costliest first, to the chunk that costs least so far and has room (longest
    processing time first). A slot plans ahead only within its chunk, so chunks of one
    test would lose that overlap: this is for suites small for their slots."""
    ops: dict[str, list[Case]] = {}
    for c in group:
        ops.setdefault(c.op, []).append(c)
    pieces = [tests[i : i + CHUNK] for tests in ops.values() for i in range(0, len(tests), CHUNK)]
    pieces.sort(key=lambda p: sum(map(case_cost, p)), reverse=True)  # stable
    bins: list[list[Any]] = [[0.0, k, []] for k in range(math.ceil(len(group) / size))]
    for piece in pieces:
        roomy = [b for b in bins if len(b[2]) + len(piece) <= size]
        if not roomy:
            bins.append([0.0, len(bins), []])
            roomy = bins[-1:]
        b = min(roomy, key=lambda b: (b[0], b[1]))
        b[0] += sum(map(case_cost, piece))
        b[2] += piece
    return [b[2] for b in sorted(bins, key=lambda b: (-b[0], b[1])) if b[2]]
