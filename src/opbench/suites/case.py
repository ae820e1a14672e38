"""A test case: a small, picklable description of one operator call (no tensors).

Tensors are made inside the worker from the description, so nothing large crosses
process boundaries and every input is reproducible from ``seed``.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Case:
    """One test: an overload, how to build its inputs, and whether it counts.

    ``source`` says how the worker materialises the inputs:

    * ``"args"``: ``args`` is trace-format text (``((T([2, 3], f16),), {})``), built by
      :func:`opbench.suites.inputs.make_inputs` from ``seed``;
    * ``"opinfo"``: ``params`` names an OpInfo sample (``opinfo``, ``variant``,
      ``dtype``, ``index``, ``kind``) that the worker re-creates from ``seed``.
    """

    op: str  # overload without "aten.", e.g. "add.Tensor"
    args: str  # trace-format text (for "opinfo" cases a readable description)
    seed: int = 0
    suite: str = ""
    source: str = "args"
    params: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    count: int = 1
    models: tuple[str, ...] = ()
    included: bool = True
    why_excluded: str | None = None
    is_synthetic: bool = False

    @property
    def test_id(self) -> str:
        """Stable id: op, a hash of what defines the inputs, and the seed."""
        key = f"{self.source}|{self.op}|{self.args}|{sorted(self.params.items())!r}"
        digest = hashlib.sha1(key.encode()).hexdigest()[:12]
        return f"{self.op}:{digest}:{self.seed}"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["models"] = list(self.models)
        d["test_id"] = self.test_id
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Case:
        d = dict(d)
        d.pop("test_id", None)
        d["models"] = tuple(d.get("models", ()))
        return cls(**d)


def derive_seed(seed: int, i: int) -> int:
    """The ``i``-th derived seed of ``seed`` (stable across processes and machines).

    Trial seeds, re-draw seeds and special-value seeds all come from here, so the worker
    and the judge derive the same inputs from a case.
    """
    if i == 0:
        return seed
    h = hashlib.sha256(f"opbench:{seed}:{i}".encode()).hexdigest()
    return int(h[:8], 16) & 0x7FFFFFFF


def timing_seeds(case: Case) -> tuple[int, int]:
    """The two draws a timed pair's calls hold, each call one of them at random: the
    case's own seed, and its first derived seed (the second correctness trial's, where
    no re-draw replaced it). The worker builds both; the harness judges a kept timed
    output against the reference of the draw it saw (:mod:`opbench.instrument.timing_inputs`).
    """
    return case.seed, derive_seed(case.seed, 1)
