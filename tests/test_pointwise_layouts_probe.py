"""``benchmarks/probes/pointwise_layouts.py --check``: every walk it times (the result's
memory order with the flat kernel for operands laid out alike, as shipped; the strided
kernel alone in memory order; the logical order before both) gives eager's values and
strides on every row (small shapes, Triton's interpreter), so none is timed while
computing something else."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")

REPO = Path(__file__).resolve().parents[1]


def test_every_walk_matches_eager_under_the_interpreter() -> None:
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "probes" / "pointwise_layouts.py"), "--check"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = [json.loads(x) for x in done.stdout.splitlines() if x.startswith("{")]
    sys.path.insert(0, str(REPO / "benchmarks" / "probes"))
    import pointwise_layouts

    assert [(r["op"], r["second"]) for r in rows] == [
        (op, s) for op, _, s in pointwise_layouts.ROWS
    ]
    assert set(pointwise_layouts.orders()) == {"memory", "strided", "logical"}
