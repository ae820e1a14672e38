"""Serve only where it wins: which operators, and within an operator which shape classes,
a backend registers, decided from a judged run.

Why: a backend registers every kernel it has, and a model then pays for every one of them,
the ones slower than eager included (the reference Triton backend made four real models'
training steps 1.8-2x slower than eager's while most of its kernels were faster on device
time). A policy built from a run (:func:`policy_from_run`) keeps, per operator and per
*shape class* (the dtype and the size bucket of the call's largest tensor argument), the
geomean speedup over the run's correct, timed tests in that class; the registry serves a
call with the backend's kernel only where that speedup beats ``min_speedup``, and hands
every other call to PyTorch's own kernel. A class the run never timed takes the operator's
verdict over all its classes; an operator that failed any test is never served.

The policy is a readable JSON file (``serve_policy.json`` in a package built with
``opbench package --from-run``), and this module needs only ``torch`` and the standard
library, because ``opbench package`` copies it into the packages it builds.
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

__all__ = [
    "POLICY_FILE",
    "OpPolicy",
    "ServePolicy",
    "policy_from_run",
    "dtype_names",
    "shape_class",
    "shape_class_of_args",
]

POLICY_FILE = "serve_policy.json"
#: Size buckets are powers of four of the largest tensor's element count (1, 4, 16, ...):
#: fine enough to separate the launch-bound calls from the bandwidth-bound ones that the
#: same kernel wins or loses on, coarse enough that a run's four rows per op fill them.
_BUCKET_BASE = 4
_TENSOR_SPEC = re.compile(r"T\(\[([0-9, ]*)\],\s*([a-z0-9]+)")
_DTYPE_NAMES = {
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.float32: "f32",
    torch.float64: "f64",
    torch.int8: "i8",
    torch.int16: "i16",
    torch.int32: "i32",
    torch.int64: "i64",
    torch.uint8: "u8",
    torch.bool: "b8",
    torch.complex64: "c64",
    torch.complex128: "c128",
}


def dtype_names() -> dict[torch.dtype, str]:
    """Every dtype of this torch with the name a shape class spells it by (the C++ gate,
    :mod:`opbench.backends.native`, is handed the same table)."""
    every = {v for v in vars(torch).values() if isinstance(v, torch.dtype)}
    return {d: _DTYPE_NAMES.get(d, str(d)) for d in every}


def _bucket(numel: int) -> int:
    return 0 if numel <= 1 else int(math.log(numel, _BUCKET_BASE))


def shape_class(dtype: str, numel: int) -> str:
    """``f16:4^7`` for a call whose largest tensor holds f16 and 4^7..4^8-1 elements."""
    return f"{dtype}:{_BUCKET_BASE}^{_bucket(numel)}"


def _tensor_args(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Iterator[torch.Tensor]:
    """The call's tensors, those in a list or tuple argument (``cat``) included."""
    for v in (*args, *kwargs.values()):
        if isinstance(v, torch.Tensor):
            yield v
        elif isinstance(v, (list, tuple)):
            yield from (t for t in v if isinstance(t, torch.Tensor))


def shape_class_of_args(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    """The shape class of a live call (None when it has no tensor argument)."""
    best = max(_tensor_args(args, kwargs), key=torch.Tensor.numel, default=None)
    if best is None:
        return None
    return shape_class(_DTYPE_NAMES.get(best.dtype, str(best.dtype)), best.numel())


def shape_class_of_spec(args: str) -> str | None:
    """The shape class of a test's arguments in the trace format (``T([4, 8], f16)``)."""
    best: tuple[int, str] | None = None
    for dims, dtype in _TENSOR_SPEC.findall(args):
        numel = math.prod(int(d) for d in dims.replace(" ", "").split(",") if d) if dims else 1
        if best is None or numel > best[0]:
            best = (numel, dtype)
    return None if best is None else shape_class(best[1], best[0])


@dataclass
class OpPolicy:
    """One operator: served at all, its verdict for classes the run did not time, and the
    measured speedup and verdict per class."""

    serve: bool
    default: bool
    classes: dict[str, dict[str, Any]] = field(default_factory=dict)

    def serves(self, cls: str | None) -> bool:
        if not self.serve:
            return False
        entry = self.classes.get(cls) if cls is not None else None
        return bool(entry["serve"]) if entry is not None else self.default

    @property
    def uniform(self) -> bool:
        """Every class gets the same answer: the registry then skips classifying calls."""
        return all(bool(e["serve"]) == self.default for e in self.classes.values())


@dataclass
class ServePolicy:
    """Per-operator serving decisions for one device kind, from one run."""

    device: str
    measure: str
    min_speedup: float
    source: str
    ops: dict[str, OpPolicy] = field(default_factory=dict)
    #: the same run's verdicts on device speedups, for the calls the C++ gate launches
    #: itself (:mod:`opbench.backends.native`): such a call costs the host what eager's
    #: does (benchmarks/results/native-launch-*.json), so its kernel's device time decides
    #: it; a call the gate cannot launch is decided by :attr:`ops`
    native_ops: dict[str, OpPolicy] = field(default_factory=dict)

    def served_ops(self) -> set[str]:
        """The operators served in at least one class."""
        return {op for op, p in self.ops.items() if p.serve}

    def serves(self, op: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        p = self.ops.get(op)
        if p is None or not p.serve:
            return False
        if p.uniform:
            return p.default
        return p.serves(shape_class_of_args(args, kwargs))

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> ServePolicy:
        data = json.loads(text)
        ops = {op: OpPolicy(**p) for op, p in data.pop("ops").items()}
        native = {op: OpPolicy(**p) for op, p in data.pop("native_ops", {}).items()}
        return cls(ops=ops, native_ops=native, **data)

    @classmethod
    def load(cls, path: str | Path) -> ServePolicy:
        path = Path(path)
        if path.is_dir():
            path = path / POLICY_FILE
        return cls.from_json(path.read_text(encoding="utf-8"))


def _geomean_of_timed(xs: list[float]) -> float | None:
    """:func:`opbench.report.means.geomean_of_timed`, kept here: this module is copied
    into packaged backends (``opbench package``), whose runtime may import only
    ``opbench.spec`` and ``opbench.backends`` (``packaging.RUNTIME_MODULES``)."""
    xs = [x for x in xs if x > 0 and math.isfinite(x)]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def policy_from_run(
    run_dir: str | Path, *, measure: str = "host", min_speedup: float = 1.0
) -> ServePolicy:
    """The policy a judged run supports (``RUN_DIR/results.sqlite``).

    ``measure``: ``host`` (host-inclusive speedups: what an eager-mode model pays; the
    default) or ``device``. An operator is served only if every one of its tests passed
    and at least one was timed; a class is served when the geomean speedup of its timed
    tests exceeds ``min_speedup``; a class with no timed test takes the operator's
    geomean over all its tests. Ops are named as the run names them (``add.Tensor``).
    :attr:`ServePolicy.native_ops` holds the device-time verdicts whatever ``measure``
    says (for the C++ gate's own launches)."""
    if measure not in ("host", "device"):
        raise ValueError(f"measure must be 'host' or 'device', not {measure!r}")
    db = Path(run_dir) / "results.sqlite"
    if not db.exists():
        raise FileNotFoundError(f"{run_dir} has no results.sqlite: not a run directory")
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = con.execute(
            "SELECT op, args, status, speedup_host, speedup, device FROM results"
        ).fetchall()
    finally:
        con.close()
    host = [(op, args, status, h, dev) for op, args, status, h, _, dev in rows]
    device = [(op, args, status, d, dev) for op, args, status, _, d, dev in rows]
    by_device = _verdicts(device, "device", min_speedup, run_dir)
    policy = by_device if measure == "device" else _verdicts(host, measure, min_speedup, run_dir)
    policy.native_ops = dict(by_device.ops)
    return policy


def _verdicts(
    rows: list[tuple[Any, ...]], measure: str, min_speedup: float, run_dir: str | Path
) -> ServePolicy:
    """One measure's policy from ``(op, args, status, speedup, device)`` rows."""
    failed: set[str] = set()
    speedups: dict[str, dict[str | None, list[float]]] = defaultdict(lambda: defaultdict(list))
    devices: set[str] = set()
    for op, args, status, speedup, device in rows:
        op = op.removeprefix("aten.")
        devices.add(str(device or "").split(":")[0])
        if status == "judge_error":
            continue
        if status != "passed":
            failed.add(op)
            continue
        if speedup is not None:
            speedups[op][shape_class_of_spec(args or "")].append(float(speedup))
    policy = ServePolicy(
        device="/".join(sorted(d for d in devices if d)) or "?",
        measure=measure,
        min_speedup=min_speedup,
        source=str(Path(run_dir).resolve()),
    )
    for op in sorted({r[0].removeprefix("aten.") for r in rows}):
        by_class = speedups.get(op, {})
        overall = _geomean_of_timed([x for xs in by_class.values() for x in xs])
        ok = op not in failed and overall is not None
        default = bool(ok and overall is not None and overall > min_speedup)
        classes = {}
        for cls, xs in sorted(by_class.items(), key=lambda kv: str(kv[0])):
            g = _geomean_of_timed(xs)
            if cls is None or g is None:
                continue
            classes[cls] = {"speedup": round(g, 4), "tests": len(xs), "serve": g > min_speedup}
        policy.ops[op] = OpPolicy(
            serve=ok and (default or any(c["serve"] for c in classes.values())),
            default=default,
            classes=classes,
        )
    return policy
